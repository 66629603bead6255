#include "backends/nccl/cuda_status.h"

#include "api/errors.h"

namespace distcomm {
namespace nccl {

std::string cuda_error_text(const char* call, cudaError_t e) {
  return std::string(call) + ": " + cudaGetErrorString(e);
}

void check_cuda(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return;
  // Clear the non-sticky error slot so that it does not resurface in an unrelated call.
  cudaGetLastError();
  throw Error(cuda_error_text(call, e));
}

std::string nccl_error_text(const char* call, ncclResult_t r, ncclComm_t comm) {
  std::string text = std::string(call) + ": " + ncclGetErrorString(r);
  if (comm) {
    const char* detail = ncclGetLastError(comm);
    if (detail && *detail) text += std::string(" (") + detail + ")";
  }
  return text;
}

void throw_nccl_error(const char* call, ncclResult_t r, ncclComm_t comm) {
  throw_nccl_text(r, nccl_error_text(call, r, comm));
}

void throw_nccl_text(ncclResult_t r, const std::string& text) {
  switch (r) {
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      throw InvalidArgument(text);
    case ncclRemoteError:
    case ncclSystemError:
      throw PeerFailure(text + "; a peer may have died or the network failed");
    default:
      throw Error(text);
  }
}

int visible_cuda_devices(std::string* why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    if (why) *why = "no CUDA device: " + cuda_error_text("cudaGetDeviceCount", e);
    return 0;
  }
  if (count <= 0) {
    if (why) *why = "no CUDA device: cudaGetDeviceCount found 0 devices";
    return 0;
  }
  return count;
}

DeviceGuard::DeviceGuard(int device) {
  check_cuda(cudaGetDevice(&previous_), "cudaGetDevice");
  if (previous_ != device) check_cuda(cudaSetDevice(device), "cudaSetDevice");
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0) cudaSetDevice(previous_);
}

}  // namespace nccl
}  // namespace distcomm
