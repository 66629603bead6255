#include "backends/nccl/op_checks.h"

#include <string>

#include "api/errors.h"

namespace distcomm {
namespace nccl {

int cuda_device_of(OpType op, const Tensor& t, int visible_devices) {
  if (!t.is_cuda()) {
    throw InvalidArgument(std::string("nccl backend: ") + op_type_name(op) + " got a tensor on " + t.device().str() +
                          "; NCCL moves CUDA tensors only");
  }
  if (t.device().index < 0 || t.device().index >= visible_devices) {
    throw InvalidArgument(std::string("nccl backend: ") + op_type_name(op) + " got a tensor on " + t.device().str() +
                          " but this process sees " + std::to_string(visible_devices) + " CUDA device(s)");
  }
  return t.device().index;
}

int same_cuda_device(OpType op, const Tensor& a, const Tensor& b, int visible_devices) {
  const int device = cuda_device_of(op, a, visible_devices);
  if (cuda_device_of(op, b, visible_devices) != device) {
    throw InvalidArgument(std::string("nccl backend: ") + op_type_name(op) + " got tensors on " + a.device().str() +
                          " and " + b.device().str() + "; they must share one device");
  }
  return device;
}

int list_cuda_device(OpType op, const Tensor& first, const std::vector<Tensor>& list, int visible_devices) {
  const int device = cuda_device_of(op, first, visible_devices);
  for (const Tensor& t : list) same_cuda_device(op, first, t, visible_devices);
  return device;
}

void check_stream_device(OpType op, int op_device, int stream_device) {
  if (stream_device == op_device) return;
  throw InvalidArgument(std::string("nccl backend: ") + op_type_name(op) + " on cuda:" + std::to_string(op_device) +
                        " was given a CUDA stream of cuda:" + std::to_string(stream_device) +
                        " (options.cuda_stream, or the thread's CudaStreamGuard); pass a stream of the tensors' "
                        "device");
}

void check_not_capturing(OpType op, StreamCapture capture) {
  const std::string head = std::string("nccl backend: ") + op_type_name(op);
  switch (capture) {
    case StreamCapture::kNone:
      return;
    case StreamCapture::kActive:
    case StreamCapture::kInvalidated:
      throw InvalidArgument(head + " on a CUDA stream that is being captured into a CUDA graph "
                                   "(cudaStreamBeginCapture): the nccl backend does not support graph capture yet; "
                                   "issue the op outside the capture");
    case StreamCapture::kImplicit:
      throw InvalidArgument(head + " on the legacy default stream while another stream of this process is being "
                                   "captured in global mode: using that stream would invalidate the capture; pass "
                                   "a stream of your own (options.cuda_stream or CudaStreamGuard), or capture in "
                                   "cudaStreamCaptureModeThreadLocal");
  }
}

}  // namespace nccl
}  // namespace distcomm
