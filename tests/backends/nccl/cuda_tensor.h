// CUDA tensors for tests: device memory that frees itself, filled from host reference data
// and read back with cudaMemcpy. distcomm never allocates device memory (users bring their
// own and wrap it with Tensor::from_blob); tests do it here.
//
// The copies run on the device's legacy default stream, the stream ops use when the
// options name none: a copy back after Work::wait() is ordered after the op, which is
// exactly what wait() promises.
#pragma once

#include <cuda_runtime_api.h>

#include <vector>

#include "api/tensor.h"

namespace distcomm {
namespace testing {

// Throws Error naming the call when a test's CUDA call failed.
void cuda_check(cudaError_t e, const char* call);

// The contents of any tensor on a CUDA device (a CudaTensor's, or a slice of one), copied to
// a new host tensor.
Tensor copy_to_host(const Tensor& on_device);

class CudaTensor {
 public:
  // A copy of a host tensor on cuda:device.
  CudaTensor(const Tensor& host, int device);
  // Zeros of that shape on cuda:device.
  static CudaTensor zeros(std::vector<int64_t> shape, DType dtype, int device);
  ~CudaTensor();
  CudaTensor(CudaTensor&& other) noexcept;
  CudaTensor& operator=(CudaTensor&&) = delete;
  CudaTensor(const CudaTensor&) = delete;

  // The device tensor ops take.
  Tensor& tensor() { return view_; }
  // Its contents, copied to the host.
  Tensor to_host() const;

 private:
  CudaTensor(std::vector<int64_t> shape, DType dtype, int device);
  void* data_ = nullptr;
  Tensor view_;
};

}  // namespace testing
}  // namespace distcomm
