#include "tools/bench/cuda_buffers.h"

#include <dlfcn.h>

#include <algorithm>

#include <memory>
#include <mutex>

#include "api/errors.h"

namespace distcomm {
namespace bench {
namespace {

// The few runtime entry points the bench uses, declared by hand so that no CUDA header is
// needed to build it. cudaError_t is an int-sized enum; 0 is cudaSuccess.
struct CudaRuntime {
  int (*get_device_count)(int*) = nullptr;
  int (*set_device)(int) = nullptr;
  int (*malloc)(void**, size_t) = nullptr;
  int (*free)(void*) = nullptr;
  int (*memcpy)(void*, const void*, size_t, int) = nullptr;
  int (*memset)(void*, int, size_t) = nullptr;
  int (*device_synchronize)() = nullptr;
  const char* (*error_string)(int) = nullptr;
  std::string missing;  // why the runtime could not be opened; empty when it was
};

constexpr int kHostToDevice = 1;  // cudaMemcpyHostToDevice
constexpr int kDeviceToHost = 2;  // cudaMemcpyDeviceToHost

template <typename F>
bool bind(void* lib, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(lib, name));
  return *out != nullptr;
}

const CudaRuntime& runtime() {
  static const CudaRuntime rt = [] {
    CudaRuntime r;
    void* lib = nullptr;
    // The unversioned name is a development link; the versioned ones are what a CUDA
    // runtime installation always has.
    for (const char* name : {"libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"}) {
      lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (lib) break;
    }
    if (!lib) {
      const char* e = dlerror();
      r.missing = std::string("the CUDA runtime (libcudart.so) could not be loaded") + (e ? std::string(": ") + e : "");
      return r;
    }
    const bool all = bind(lib, "cudaGetDeviceCount", &r.get_device_count) &&
                     bind(lib, "cudaSetDevice", &r.set_device) && bind(lib, "cudaMalloc", &r.malloc) && bind(lib, "cudaFree", &r.free) &&
                     bind(lib, "cudaMemcpy", &r.memcpy) && bind(lib, "cudaMemset", &r.memset) &&
                     bind(lib, "cudaDeviceSynchronize", &r.device_synchronize) &&
                     bind(lib, "cudaGetErrorString", &r.error_string);
    if (!all) r.missing = "the CUDA runtime that was loaded lacks a function the bench calls";
    return r;
  }();
  return rt;
}

const CudaRuntime& loaded() {
  const CudaRuntime& r = runtime();
  if (!r.missing.empty()) throw BackendUnavailable("no CUDA device: " + r.missing);
  return r;
}

void check(int e, const char* call) {
  if (e == 0) return;
  throw Error(std::string(call) + " failed: " + runtime().error_string(e));
}

void on_device(int device) { check(loaded().set_device(device), "cudaSetDevice"); }

}  // namespace

void require_cuda_devices(int highest_index, const std::string& why_needed) {
  const CudaRuntime& r = loaded();
  int count = 0;
  const int e = r.get_device_count(&count);
  // With no driver or no GPU the runtime answers an error (cudaErrorInsufficientDriver,
  // cudaErrorNoDevice), not a count of 0: both mean the same here.
  if (e != 0) throw BackendUnavailable("no CUDA device: " + std::string(r.error_string(e)) + " (" + why_needed + ")");
  if (count <= highest_index) {
    throw BackendUnavailable("no CUDA device: " + why_needed + " needs cuda:0 to cuda:" +
                             std::to_string(highest_index) + ", and this machine has " + std::to_string(count) +
                             " CUDA device(s)");
  }
}

Tensor cuda_empty(int64_t count, DType dtype, int device) {
  const CudaRuntime& r = loaded();
  on_device(device);
  void* p = nullptr;
  // cudaMalloc of 0 bytes gives no pointer; one byte keeps a defined tensor.
  const size_t bytes = std::max<size_t>(1, static_cast<size_t>(count) * element_size(dtype));
  check(r.malloc(&p, bytes), "cudaMalloc");
  std::shared_ptr<void> owner(p, [device](void* q) {
    const CudaRuntime& rt = runtime();
    rt.set_device(device);
    rt.free(q);  // nothing to do about a failure while freeing
  });
  return Tensor::from_blob(p, {count}, dtype, Device::cuda(device), owner);
}

void copy_host_to_device(const Tensor& host, const Tensor& device) {
  if (host.nbytes() == 0) return;
  on_device(device.device().index);
  check(loaded().memcpy(device.data(), host.data(), host.nbytes(), kHostToDevice), "cudaMemcpy to the device");
}

void copy_device_to_host(const Tensor& device, const Tensor& host) {
  if (host.nbytes() == 0) return;
  on_device(device.device().index);
  check(loaded().memcpy(host.data(), device.data(), host.nbytes(), kDeviceToHost), "cudaMemcpy to the host");
}

void zero_device(const Tensor& device) {
  if (device.nbytes() == 0) return;
  on_device(device.device().index);
  check(loaded().memset(device.data(), 0, device.nbytes()), "cudaMemset");
}

void synchronize_device(int device) {
  on_device(device);
  check(loaded().device_synchronize(), "cudaDeviceSynchronize");
}

}  // namespace bench
}  // namespace distcomm
