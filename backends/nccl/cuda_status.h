// CUDA and NCCL status codes as distcomm errors, and a scoped current-device switch.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>

#include "backends/nccl/op_checks.h"

namespace distcomm {
namespace nccl {

// "cudaEventRecord: an illegal memory access was encountered"
std::string cuda_error_text(const char* call, cudaError_t e);
// Throws distcomm::Error naming the call when e is not cudaSuccess.
void check_cuda(cudaError_t e, const char* call);

// "ncclAllReduce: remote process exited or there was a network error (NCCL's last warning:
// ...)". With a communicator, ncclGetLastError's text is added, named for what it is: NCCL
// keeps one buffer per process, so it may be about another communicator.
std::string nccl_error_text(const char* call, ncclResult_t r, ncclComm_t comm = nullptr);
// NCCL's result as the distcomm error it is, with what it means added to `text`:
// InvalidArgument for argument and usage errors; PeerFailure for ncclRemoteError (a peer
// died or the network failed); Error for the rest, ncclSystemError included -- a failed
// system call on this rank (shared memory, sockets, memory), which is often local.
std::exception_ptr nccl_error(ncclResult_t r, const std::string& text);
// Throws nccl_error(r, nccl_error_text(call, r, comm)).
[[noreturn]] void throw_nccl_error(const char* call, ncclResult_t r, ncclComm_t comm = nullptr);
// The same, with the text already made (when the communicator is about to go away).
[[noreturn]] void throw_nccl_text(ncclResult_t r, const std::string& text);

// How many CUDA devices this process sees. On failure returns 0 and says why in *why, in
// the words the plugin's available() probe reports: "no CUDA device: cudaGetDeviceCount: ...".
int visible_cuda_devices(std::string* why);

// Whether `device` has an active primary context in this process, asked of the driver
// through the runtime's entry-point lookup (distcomm does not link libcuda). True when the
// driver cannot say.
bool has_primary_context(int device);

// Makes `device` current for a scope (CUDA's current device is per thread, and NCCL
// creates communicators and streams on it), then restores the previous one, but only if
// that one has a context: a thread that never chose a device reports device 0, and since
// CUDA 12 making a device current creates its context, so restoring blindly would give
// every rank a context (about 0.5 GiB) on GPU 0.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// For threads distcomm owns (the watchdog): makes `device` current once, before the
// thread's first CUDA call, which would otherwise create a context on device 0, and puts
// the thread in relaxed capture mode for good, so that its event queries neither fail nor
// break a capture another thread of the program runs in global mode.
void bind_thread_to_device(int device);

// The device a caller's stream belongs to; nullptr (the legacy default stream) and
// cudaStreamPerThread mean the current device's. InvalidArgument if CUDA does not know
// the stream.
int stream_device(cudaStream_t stream);

// Whether `stream` is being captured into a CUDA graph (cudaStreamIsCapturing).
// InvalidArgument if CUDA does not know the stream.
StreamCapture stream_capture(cudaStream_t stream);

// For a scope, this thread may make CUDA calls that are unsafe while another thread
// captures in global mode (cudaMalloc, stream and event creation): they would otherwise
// fail and invalidate that thread's capture. Nothing distcomm does in the scope is
// captured: it issues nothing on a capturing stream (check_not_capturing).
class RelaxedCaptureMode {
 public:
  RelaxedCaptureMode();
  ~RelaxedCaptureMode();
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

 private:
  cudaStreamCaptureMode previous_;
  bool changed_ = false;
};

}  // namespace nccl
}  // namespace distcomm
