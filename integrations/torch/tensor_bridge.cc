#include "integrations/torch/tensor_bridge.h"

#include <ATen/ops/from_blob.h>

#include <memory>
#include <sstream>
#include <string>

#include "api/errors.h"

namespace distcomm {
namespace torch {
namespace {

const char* const kSupported = "float32, float64, float16, bfloat16, int8, uint8, int32, int64 and bool";

std::string describe(const at::Tensor& t) {
  std::ostringstream s;
  s << "a torch tensor of dtype " << t.scalar_type() << ", sizes " << t.sizes();
  if (t.layout() == c10::kStrided) s << ", strides " << t.strides();
  s << " on " << t.device();
  return s.str();
}

}  // namespace

DType to_dtype(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Float: return DType::kFloat32;
    case c10::ScalarType::Double: return DType::kFloat64;
    case c10::ScalarType::Half: return DType::kFloat16;
    case c10::ScalarType::BFloat16: return DType::kBFloat16;
    case c10::ScalarType::Char: return DType::kInt8;
    case c10::ScalarType::Byte: return DType::kUInt8;
    case c10::ScalarType::Int: return DType::kInt32;
    case c10::ScalarType::Long: return DType::kInt64;
    case c10::ScalarType::Bool: return DType::kBool;
    default: break;
  }
  throw InvalidArgument(std::string("torch dtype ") + c10::toString(type) +
                        " has no distcomm dtype; distcomm moves " + kSupported +
                        " (convert with t.to(torch::kFloat) or a type of that list)");
}

c10::ScalarType to_scalar_type(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return c10::ScalarType::Float;
    case DType::kFloat64: return c10::ScalarType::Double;
    case DType::kFloat16: return c10::ScalarType::Half;
    case DType::kBFloat16: return c10::ScalarType::BFloat16;
    case DType::kInt8: return c10::ScalarType::Char;
    case DType::kUInt8: return c10::ScalarType::Byte;
    case DType::kInt32: return c10::ScalarType::Int;
    case DType::kInt64: return c10::ScalarType::Long;
    case DType::kBool: return c10::ScalarType::Bool;
  }
  throw InvalidArgument("distcomm dtype " + std::to_string(static_cast<int>(dtype)) + " is not a known dtype");
}

Device to_device(const c10::Device& device) {
  if (device.is_cpu()) return Device::cpu();
  // A CUDA tensor's device always has an index; a bare "cuda" device means the current one.
  if (device.is_cuda()) return Device::cuda(device.has_index() ? device.index() : 0);
  throw InvalidArgument("torch device " + device.str() + " has no distcomm device; distcomm moves cpu and cuda tensors");
}

c10::Device to_torch_device(const Device& device) {
  if (device.is_cpu()) return c10::Device(c10::DeviceType::CPU);
  return c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(device.index));
}

Tensor as_tensor(const at::Tensor& t) {
  if (!t.defined()) throw InvalidArgument("as_tensor: the torch tensor is undefined (a default-constructed at::Tensor)");
  if (t.layout() != c10::kStrided) {
    std::ostringstream layout;
    layout << t.layout();
    throw InvalidArgument("as_tensor: " + describe(t) + " is not dense (layout " + layout.str() +
                          "); distcomm moves dense tensors: use t.to_dense()");
  }
  const DType dtype = to_dtype(t.scalar_type());
  const Device device = to_device(t.device());
  if (!t.is_contiguous()) {
    throw InvalidArgument("as_tensor: " + describe(t) +
                          " is not contiguous; distcomm reads and writes one dense block: use t.contiguous() "
                          "(a copy: write the result back with t.copy_(c) if the op writes)");
  }
  if (t.is_neg()) {
    throw InvalidArgument("as_tensor: " + describe(t) +
                          " carries a lazy negation (its memory holds the values negated): use t.resolve_neg()");
  }
  // The at::Tensor (a reference-counted handle) is the owner: it keeps the storage alive.
  auto owner = std::make_shared<at::Tensor>(t);
  std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
  return Tensor::from_blob(t.data_ptr(), std::move(shape), dtype, device, std::move(owner));
}

at::Tensor from_tensor(const Tensor& t) {
  if (!t.defined()) throw InvalidArgument("from_tensor: the distcomm Tensor is undefined");
  std::vector<int64_t> sizes = t.shape();
  auto options = at::TensorOptions().dtype(to_scalar_type(t.dtype())).device(to_torch_device(t.device()));
  // The deleter holds a copy of t, so distcomm's buffer lives as long as the torch tensor.
  return at::from_blob(t.data(), sizes, [keep = t](void*) {}, options);
}

}  // namespace torch
}  // namespace distcomm
