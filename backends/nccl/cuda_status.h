// CUDA and NCCL status codes as distcomm errors, and a scoped current-device switch.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>

namespace distcomm {
namespace nccl {

// "cudaEventRecord: an illegal memory access was encountered"
std::string cuda_error_text(const char* call, cudaError_t e);
// Throws distcomm::Error naming the call when e is not cudaSuccess.
void check_cuda(cudaError_t e, const char* call);

// "ncclAllReduce: remote process exited or there was a network error (detail: ...)".
// With a communicator, ncclGetLastError's detail is added.
std::string nccl_error_text(const char* call, ncclResult_t r, ncclComm_t comm = nullptr);
// InvalidArgument for NCCL's argument and usage errors, PeerFailure for remote and system
// errors (a peer died, a connection broke), Error for the rest.
[[noreturn]] void throw_nccl_error(const char* call, ncclResult_t r, ncclComm_t comm = nullptr);
// The same, with the text already made (when the communicator is about to go away).
[[noreturn]] void throw_nccl_text(ncclResult_t r, const std::string& text);

// How many CUDA devices this process sees. On failure returns 0 and says why in *why, in
// the words the plugin's available() probe reports: "no CUDA device: cudaGetDeviceCount: ...".
int visible_cuda_devices(std::string* why);

// Makes `device` current for a scope (CUDA's current device is per thread, and NCCL
// creates communicators and streams on it), then restores the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace nccl
}  // namespace distcomm
