// Zero-copy bridge between PyTorch tensors (at::Tensor, libtorch) and distcomm Tensors, so
// that every ProcessGroup op works on torch tensors:
//
//   at::Tensor t = at::ones({4});
//   pg->all_reduce(distcomm::torch::as_tensor(t))->wait();   // t now holds the sum
//
// Both directions share memory (a write through one is seen through the other) and keep
// the other side's memory alive: the distcomm Tensor holds the at::Tensor's storage, the
// at::Tensor holds the distcomm Tensor's buffer (when distcomm owns it).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "api/device.h"
#include "api/dtype.h"
#include "api/tensor.h"

namespace distcomm {
namespace torch {

// float32 <-> Float, float64 <-> Double, float16 <-> Half, bfloat16 <-> BFloat16, int8 <->
// Char, uint8 <-> Byte, int32 <-> Int, int64 <-> Long, bool <-> Bool. Other torch dtypes
// (complex, int16, quantized, ...) throw InvalidArgument naming the dtype and the supported ones.
DType to_dtype(c10::ScalarType type);
c10::ScalarType to_scalar_type(DType dtype);

// cpu <-> cpu, cuda:i <-> cuda:i; other device types throw InvalidArgument.
Device to_device(const c10::Device& device);
c10::Device to_torch_device(const Device& device);

// A distcomm view of t's memory (CPU or CUDA), holding t's storage. t must be defined,
// dense (strided), contiguous, of a supported dtype and without a lazy negation bit;
// otherwise InvalidArgument says which rule it breaks and how to fix it (t.contiguous(),
// t.to_dense(), t.resolve_neg(), t.to(torch::kFloat)). The view is of the memory t has now:
// an op that gives t new storage (resize_, set_) leaves the view on the old one.
Tensor as_tensor(const at::Tensor& t);

// A torch view of t's memory, on t's device; it holds t's buffer when t owns it (a
// from_blob view of caller memory must outlive the at::Tensor, as with at::from_blob).
at::Tensor from_tensor(const Tensor& t);

}  // namespace torch
}  // namespace distcomm
