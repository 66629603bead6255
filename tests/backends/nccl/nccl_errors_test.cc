// How NCCL's results become distcomm errors (cuda_status.h): a peer is blamed only when
// NCCL blames one (ncclRemoteError); ncclSystemError, a failed system call on this rank,
// is an Error that says so. No GPU needed: nothing here calls the device.
#include <gtest/gtest.h>

#include "api/errors.h"
#include "backends/nccl/cuda_status.h"

namespace distcomm {
namespace nccl {
namespace {

// "<type>: <message>" of the error nccl_error makes.
std::string made(ncclResult_t r) {
  try {
    std::rethrow_exception(nccl_error(r, "ncclAllReduce: failed"));
  } catch (const InvalidArgument& e) {
    return std::string("InvalidArgument: ") + e.what();
  } catch (const PeerFailure& e) {
    return std::string("PeerFailure: ") + e.what();
  } catch (const Error& e) {
    return std::string("Error: ") + e.what();
  }
  return "";
}

TEST(NcclErrorsTest, OnlyARemoteErrorBlamesAPeer) {
  EXPECT_EQ(made(ncclRemoteError), "PeerFailure: ncclAllReduce: failed; a peer may have died or the network failed");
  const std::string system = made(ncclSystemError);
  EXPECT_EQ(system.rfind("Error: ncclAllReduce: failed; a system call failed on this rank", 0), 0u) << system;
  EXPECT_NE(system.find("shared memory, sockets, memory"), std::string::npos) << system;
  EXPECT_EQ(made(ncclUnhandledCudaError), "Error: ncclAllReduce: failed; a CUDA call inside NCCL failed on this rank");
  EXPECT_EQ(made(ncclInternalError), "Error: ncclAllReduce: failed");
  EXPECT_EQ(made(ncclInvalidArgument), "InvalidArgument: ncclAllReduce: failed");
  EXPECT_EQ(made(ncclInvalidUsage), "InvalidArgument: ncclAllReduce: failed");
}

TEST(NcclErrorsTest, ThrowNcclTextThrowsTheSameError) {
  EXPECT_THROW(throw_nccl_text(ncclRemoteError, "x"), PeerFailure);
  try {
    throw_nccl_text(ncclSystemError, "x");
    ADD_FAILURE() << "nothing thrown";
  } catch (const PeerFailure&) {
    ADD_FAILURE() << "ncclSystemError reported as a peer's failure";
  } catch (const Error&) {
  }
}

}  // namespace
}  // namespace nccl
}  // namespace distcomm
