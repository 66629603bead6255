// What the nccl backend refuses before anything is issued, each an InvalidArgument that
// leaves the group usable: host tensors, devices this process does not see, tensors on two
// devices, a caller's stream of another device, and one being captured into a CUDA graph.
#include "backends/nccl/op_checks.h"

#include <gtest/gtest.h>

#include "api/errors.h"
#include "tests/backends/nccl/fake_device.h"

namespace distcomm {
namespace nccl {
namespace {

// Never dereferenced: the checks look at the device only.
Tensor on(Device device) {
  static float word = 0;
  return Tensor::from_blob(&word, {1}, DType::kFloat32, device);
}

// What fn threw, as an InvalidArgument's message ("no error" if it threw nothing).
template <typename Fn>
std::string refusal(Fn fn) {
  std::exception_ptr thrown;
  try {
    fn();
  } catch (...) {
    thrown = std::current_exception();
  }
  return testing::message_of<InvalidArgument>(thrown);
}

TEST(OpChecksTest, CudaTensorsOnAVisibleDevice) {
  EXPECT_EQ(cuda_device_of(OpType::kAllReduce, on(Device::cuda(1)), 2), 1);
  EXPECT_EQ(refusal([] { cuda_device_of(OpType::kAllReduce, on(Device::cpu()), 2); }),
            "nccl backend: all_reduce got a tensor on cpu; NCCL moves CUDA tensors only");
  EXPECT_EQ(refusal([] { cuda_device_of(OpType::kBroadcast, on(Device::cuda(2)), 2); }),
            "nccl backend: broadcast got a tensor on cuda:2 but this process sees 2 CUDA device(s)");
}

TEST(OpChecksTest, OneDevicePerOp) {
  EXPECT_EQ(same_cuda_device(OpType::kAllGather, on(Device::cuda(1)), on(Device::cuda(1)), 2), 1);
  EXPECT_EQ(refusal([] { same_cuda_device(OpType::kAllGather, on(Device::cuda(0)), on(Device::cuda(1)), 2); }),
            "nccl backend: all_gather got tensors on cuda:0 and cuda:1; they must share one device");
  const std::vector<Tensor> list = {on(Device::cuda(1)), on(Device::cuda(1))};
  EXPECT_EQ(list_cuda_device(OpType::kAllToAll, on(Device::cuda(1)), list, 2), 1);
  EXPECT_EQ(list_cuda_device(OpType::kGather, on(Device::cuda(1)), {}, 2), 1) << "a non-root's empty list";
  const std::vector<Tensor> mixed = {on(Device::cuda(1)), on(Device::cuda(0))};
  EXPECT_EQ(refusal([&] { list_cuda_device(OpType::kScatter, on(Device::cuda(1)), mixed, 2); }),
            "nccl backend: scatter got tensors on cuda:1 and cuda:0; they must share one device");
}

TEST(OpChecksTest, TheCallersStreamMustBeOnTheOpsDevice) {
  EXPECT_EQ(refusal([] { check_stream_device(OpType::kAllReduce, 0, 0); }), "no error");
  EXPECT_EQ(refusal([] { check_stream_device(OpType::kAllReduce, 0, 1); }),
            "nccl backend: all_reduce on cuda:0 was given a CUDA stream of cuda:1 (options.cuda_stream, or the "
            "thread's CudaStreamGuard); pass a stream of the tensors' device");
}

TEST(OpChecksTest, AStreamBeingCapturedIsRefused) {
  EXPECT_EQ(refusal([] { check_not_capturing(OpType::kAllReduce, StreamCapture::kNone); }), "no error");
  for (StreamCapture c : {StreamCapture::kActive, StreamCapture::kInvalidated}) {
    const std::string m = refusal([c] { check_not_capturing(OpType::kBroadcast, c); });
    EXPECT_NE(m.find("nccl backend: broadcast on a CUDA stream that is being captured into a CUDA graph"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("does not support graph capture"), std::string::npos) << m;
  }
  const std::string m = refusal([] { check_not_capturing(OpType::kSend, StreamCapture::kImplicit); });
  EXPECT_NE(m.find("send on the legacy default stream while another stream of this process is being captured"),
            std::string::npos)
      << m;
}

}  // namespace
}  // namespace nccl
}  // namespace distcomm
