#include "backends/nccl/cuda_status.h"

#include <cuda.h>  // driver types only: the functions are looked up through the runtime

#include "api/errors.h"

namespace distcomm {
namespace nccl {
namespace {

// A driver function, or nullptr when the driver does not have it.
template <typename Fn>
Fn driver_function(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return reinterpret_cast<Fn>(fn);
}

}  // namespace

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
    if (detail && *detail) text += std::string(" (NCCL's last warning: ") + detail + ")";
  }
  return text;
}

void throw_nccl_error(const char* call, ncclResult_t r, ncclComm_t comm) {
  throw_nccl_text(r, nccl_error_text(call, r, comm));
}

std::exception_ptr nccl_error(ncclResult_t r, const std::string& text) {
  switch (r) {
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return std::make_exception_ptr(InvalidArgument(text));
    case ncclRemoteError:
      return std::make_exception_ptr(PeerFailure(text + "; a peer may have died or the network failed"));
    case ncclSystemError:
      return std::make_exception_ptr(
          Error(text + "; a system call failed on this rank (shared memory, sockets, memory, file descriptors): "
                       "often a local cause, though a peer whose connection went away can end the same way"));
    case ncclUnhandledCudaError:
      return std::make_exception_ptr(Error(text + "; a CUDA call inside NCCL failed on this rank"));
    default:
      return std::make_exception_ptr(Error(text));
  }
}

void throw_nccl_text(ncclResult_t r, const std::string& text) { std::rethrow_exception(nccl_error(r, text)); }

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

bool has_primary_context(int device) {
  using DeviceGet = CUresult (*)(CUdevice*, int);
  using PrimaryCtxGetState = CUresult (*)(CUdevice, unsigned int*, int*);
  static const auto device_get = driver_function<DeviceGet>("cuDeviceGet");
  static const auto get_state = driver_function<PrimaryCtxGetState>("cuDevicePrimaryCtxGetState");
  if (!device_get || !get_state) return true;
  CUdevice handle;
  unsigned int flags = 0;
  int active = 0;
  if (device_get(&handle, device) != CUDA_SUCCESS || get_state(handle, &flags, &active) != CUDA_SUCCESS) return true;
  return active != 0;
}

DeviceGuard::DeviceGuard(int device) {
  check_cuda(cudaGetDevice(&previous_), "cudaGetDevice");
  if (previous_ == device) {
    previous_ = -1;  // nothing to restore
    return;
  }
  check_cuda(cudaSetDevice(device), "cudaSetDevice");
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0 && has_primary_context(previous_)) cudaSetDevice(previous_);
}

void bind_thread_to_device(int device) {
  thread_local bool bound = false;
  if (bound) return;
  bound = true;
  if (cudaSetDevice(device) != cudaSuccess) cudaGetLastError();  // the poll that follows reports the error
  cudaStreamCaptureMode relaxed = cudaStreamCaptureModeRelaxed;
  if (cudaThreadExchangeStreamCaptureMode(&relaxed) != cudaSuccess) cudaGetLastError();
}

StreamCapture stream_capture(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaError_t e = cudaStreamIsCapturing(stream, &status);
  if (e == cudaErrorStreamCaptureImplicit) {
    cudaGetLastError();
    return StreamCapture::kImplicit;
  }
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw InvalidArgument("the CUDA stream of the op (options.cuda_stream, or the thread's CudaStreamGuard) is not "
                          "usable: " + cuda_error_text("cudaStreamIsCapturing", e));
  }
  switch (status) {
    case cudaStreamCaptureStatusActive:
      return StreamCapture::kActive;
    case cudaStreamCaptureStatusInvalidated:
      return StreamCapture::kInvalidated;
    default:
      return StreamCapture::kNone;
  }
}

RelaxedCaptureMode::RelaxedCaptureMode() {
  previous_ = cudaStreamCaptureModeRelaxed;
  if (cudaThreadExchangeStreamCaptureMode(&previous_) == cudaSuccess) {
    changed_ = true;
  } else {
    cudaGetLastError();
  }
}

RelaxedCaptureMode::~RelaxedCaptureMode() {
  if (changed_ && cudaThreadExchangeStreamCaptureMode(&previous_) != cudaSuccess) cudaGetLastError();
}

int stream_device(cudaStream_t stream) {
  int device = -1;
  const cudaError_t e = cudaStreamGetDevice(stream, &device);
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw InvalidArgument("the CUDA stream of the op (options.cuda_stream, or the thread's CudaStreamGuard) is not "
                          "usable: " +
                          cuda_error_text("cudaStreamGetDevice", e));
  }
  return device;
}

}  // namespace nccl
}  // namespace distcomm
