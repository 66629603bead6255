#include "tests/backends/nccl/cuda_tensor.h"

#include <cuda_runtime_api.h>

#include "api/errors.h"

namespace distcomm {
namespace testing {
void cuda_check(cudaError_t e, const char* call) {
  if (e != cudaSuccess) throw Error(std::string("test CUDA call ") + call + ": " + cudaGetErrorString(e));
}

CudaTensor::CudaTensor(std::vector<int64_t> shape, DType dtype, int device) {
  cuda_check(cudaSetDevice(device), "cudaSetDevice");
  Tensor probe = Tensor::empty(shape, dtype);  // for the byte count, and shape checks
  // Never zero bytes: an empty tensor still gets a valid device address.
  cuda_check(cudaMalloc(&data_, probe.nbytes() > 0 ? probe.nbytes() : 1), "cudaMalloc");
  view_ = Tensor::from_blob(data_, std::move(shape), dtype, Device::cuda(device));
}

CudaTensor::CudaTensor(const Tensor& host, int device) : CudaTensor(host.shape(), host.dtype(), device) {
  if (host.nbytes() > 0) cuda_check(cudaMemcpy(data_, host.data(), host.nbytes(), cudaMemcpyHostToDevice), "cudaMemcpy");
}

CudaTensor CudaTensor::zeros(std::vector<int64_t> shape, DType dtype, int device) {
  CudaTensor t(std::move(shape), dtype, device);
  cuda_check(cudaMemset(t.data_, 0, t.view_.nbytes()), "cudaMemset");
  return t;
}

CudaTensor::CudaTensor(CudaTensor&& other) noexcept : data_(other.data_), view_(other.view_) {
  other.data_ = nullptr;
}

CudaTensor::~CudaTensor() {
  // cudaFree waits for the device: an op still using the memory finishes first.
  if (data_) cudaFree(data_);
}

Tensor copy_to_host(const Tensor& on_device) {
  cuda_check(cudaSetDevice(on_device.device().index), "cudaSetDevice");
  Tensor host = Tensor::empty(on_device.shape(), on_device.dtype());
  if (on_device.nbytes() > 0) {
    cuda_check(cudaMemcpy(host.data(), on_device.data(), on_device.nbytes(), cudaMemcpyDeviceToHost), "cudaMemcpy");
  }
  return host;
}

Tensor CudaTensor::to_host() const { return copy_to_host(view_); }

}  // namespace testing
}  // namespace distcomm
