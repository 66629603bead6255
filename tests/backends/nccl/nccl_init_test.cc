// init_process_group with backend "nccl" on a machine without a GPU: a clear
// BackendUnavailable carrying CUDA's reason, on every rank, and no rank left waiting.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "api/errors.h"
#include "api/store/hash_store.h"
#include "api/init.h"
#include "tests/backends/nccl/cuda_test_env.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace {

// Runs init_process_group for backend "nccl" and returns its BackendUnavailable message
// ("" with a failure recorded if it did not throw one).
std::string init_error(InitOptions o) {
  o.backend = "nccl";
  try {
    init_process_group(o);
    ADD_FAILURE() << "init_process_group(backend \"nccl\") succeeded without a CUDA device";
  } catch (const BackendUnavailable& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected BackendUnavailable, got: " << e.what();
  }
  return "";
}

TEST(NcclInitTest, InitFailsWithBackendUnavailableNamingCudasReason) {
  const std::string expected = testing::expected_nccl_unavailable_reason();
  if (expected.empty()) GTEST_SKIP() << "a CUDA device is present";
  InitOptions o;
  o.store = std::make_shared<HashStore>();
  o.rank = 0;
  o.world_size = 1;
  const std::string m = init_error(o);
  EXPECT_NE(m.find("'nccl'"), std::string::npos) << m;
  EXPECT_NE(m.find(expected), std::string::npos) << m;
  EXPECT_FALSE(is_initialized()) << "a failed init leaves no default group behind";
}

TEST(NcclInitTest, EveryRankOfAJobFailsFastInsteadOfWaiting) {
  const std::string expected = testing::expected_nccl_unavailable_reason();
  if (expected.empty()) GTEST_SKIP() << "a CUDA device is present";
  const std::string path = std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") +
                           "/nccl_init_store_" + std::to_string(::getpid());
  std::remove(path.c_str());
  const auto start = std::chrono::steady_clock::now();
  testing::run_ranks(3, [&](int rank, int size) {
    InitOptions o;
    o.init_method = "file://" + path;
    o.rank = rank;
    o.world_size = size;
    o.timeout = std::chrono::seconds(60);  // a rank left waiting would take this long
    const std::string m = init_error(o);
    EXPECT_NE(m.find(expected), std::string::npos) << "rank " << rank << ": " << m;
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  std::remove(path.c_str());
}

}  // namespace
}  // namespace distcomm
