// Tensor: a dense, contiguous block of elements with a dtype, a shape and a device.
//
// distcomm is not a math library: a Tensor is what collectives read and write. It either
// owns its memory (shared between copies of the Tensor, like a torch tensor's storage) or
// is a view of memory the caller owns (from_blob), which is how user buffers and CUDA
// device pointers enter distcomm.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "api/device.h"
#include "api/dtype.h"

namespace distcomm {

// What Tensor::empty (and zeros) throw when the host cannot give the memory: a
// std::bad_alloc, as before, that says how much was asked for and for what tensor.
class TensorAllocationError : public std::bad_alloc {
 public:
  explicit TensorAllocationError(std::string message) : message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};

class Tensor {
 public:
  Tensor() = default;  // undefined: defined() is false

  // Host memory, owned (TensorAllocationError when the host has none to give). CUDA memory
  // is never allocated by distcomm: wrap it with from_blob.
  static Tensor empty(std::vector<int64_t> shape, DType dtype = DType::kFloat32,
                      Device device = Device::cpu());
  static Tensor zeros(std::vector<int64_t> shape, DType dtype = DType::kFloat32);
  // A 1-D float32 (or T) tensor holding the values.
  template <typename T = float>
  static Tensor of(std::initializer_list<T> values);
  template <typename T>
  static Tensor of(const std::vector<T>& values);
  // A view of memory the caller owns and keeps alive while distcomm uses it.
  static Tensor from_blob(void* data, std::vector<int64_t> shape, DType dtype,
                          Device device = Device::cpu());
  // A view of memory another library owns (a torch tensor's storage): every copy of the
  // Tensor holds `owner`, so the memory lives while distcomm uses it (an op in flight
  // included); owns_memory() is then true.
  static Tensor from_blob(void* data, std::vector<int64_t> shape, DType dtype, Device device,
                          std::shared_ptr<void> owner);

  bool defined() const { return data_ != nullptr || dtype_set_; }
  void* data() const { return data_; }
  template <typename T>
  T* data_as() const;  // checks that T matches dtype()
  DType dtype() const { return dtype_; }
  const Device& device() const { return device_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return static_cast<size_t>(numel_) * element_size(dtype_); }
  bool is_cpu() const { return device_.is_cpu(); }
  bool is_cuda() const { return device_.is_cuda(); }
  bool owns_memory() const { return storage_ != nullptr; }

  // The elements [offset, offset + count) of the flattened tensor, sharing memory.
  Tensor flat_slice(int64_t offset, int64_t count) const;
  // Same memory, another shape with the same numel.
  Tensor reshape(std::vector<int64_t> shape) const;
  // A new host tensor with the same contents (host tensors only).
  Tensor clone() const;
  // Copies src's bytes into this tensor; dtype and numel must match (host tensors only).
  void copy_from(const Tensor& src);
  // Sets every element to value, converted to dtype (host only).
  void fill(double value);
  // Element i of the flattened tensor as a double (host only; for tests and printing).
  double item(int64_t i = 0) const;
  void set_item(int64_t i, double value);
  // All elements as doubles (host only).
  std::vector<double> to_doubles() const;
  // "tensor([1, 2, -3], dtype=float32)" -- for examples and error messages.
  std::string str(int64_t max_elements = 16) const;
  // "float32[2, 3] on cpu"
  std::string describe() const;

 private:
  std::shared_ptr<void> storage_;
  void* data_ = nullptr;
  DType dtype_ = DType::kFloat32;
  bool dtype_set_ = false;
  Device device_;
  std::vector<int64_t> shape_;
  int64_t numel_ = 0;
};

std::string shape_str(const std::vector<int64_t>& shape);

template <typename T>
Tensor Tensor::of(std::initializer_list<T> values) {
  return of(std::vector<T>(values));
}

template <typename T>
Tensor Tensor::of(const std::vector<T>& values) {
  Tensor t = empty({static_cast<int64_t>(values.size())}, DTypeOf<T>::value);
  T* p = t.data_as<T>();
  for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  return t;
}

// Throws InvalidArgument when T is not the storage type of dtype (data_as<T> uses it).
void check_element_type(const Tensor& t, DType requested);

template <typename T>
T* Tensor::data_as() const {
  check_element_type(*this, DTypeOf<T>::value);
  return static_cast<T*>(data_);
}

}  // namespace distcomm
