#include "api/tensor.h"

#include <algorithm>
#include <cstdlib>
#include <type_traits>
#include <cstring>
#include <sstream>

#include "api/errors.h"

namespace distcomm {
namespace {

// From this size a tensor starts on a page (see Tensor::empty).
constexpr size_t kPageAlignedFromBytes = 64 * 1024;

// a * b into *out, or false when it does not fit in int64_t. Every product of sizes, and
// of a count by an element size, goes through here.
bool checked_mul(int64_t a, int64_t b, int64_t* out) { return !__builtin_mul_overflow(a, b, out); }

// The number of elements of `shape`, after checking that no size is negative and that the
// tensor's bytes (numel times dtype's element size) fit in int64_t: a Tensor's numel() and
// nbytes(), and every offset into it (flat_slice), are then free of overflow. As torch
// says, naming the sizes: a wrapped product once made a 2^61-element tensor of 0 bytes.
int64_t checked_numel(const std::vector<int64_t>& shape, DType dtype) {
  int64_t n = 1;
  bool overflowed = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      throw InvalidArgument("shape " + shape_str(shape) + " has a negative size in dimension " +
                            std::to_string(i));
    }
    if (!overflowed && !checked_mul(n, shape[i], &n)) overflowed = true;
  }
  // A size of 0 anywhere makes an empty tensor, whatever the others are.
  if (std::find(shape.begin(), shape.end(), int64_t{0}) != shape.end()) return 0;
  int64_t bytes = 0;
  if (overflowed || !checked_mul(n, static_cast<int64_t>(element_size(dtype)), &bytes)) {
    throw InvalidArgument("Storage size calculation overflowed with sizes=" + shape_str(shape) + " and dtype " +
                          dtype_name(dtype) + " (" + std::to_string(element_size(dtype)) +
                          " bytes an element): a tensor holds at most 2^63 - 1 bytes");
  }
  return n;
}

void require_cpu(const Tensor& t, const char* what) {
  if (!t.is_cpu()) {
    throw InvalidArgument(std::string(what) + " works on host tensors only; this one is on " +
                          t.device().str());
  }
}

}  // namespace

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  s += ']';
  return s;
}

void check_element_type(const Tensor& t, DType requested) {
  if (t.dtype() != requested) {
    throw InvalidArgument(std::string("tensor holds ") + dtype_name(t.dtype()) + ", read as " +
                          dtype_name(requested));
  }
}

Tensor Tensor::empty(std::vector<int64_t> shape, DType dtype, Device device) {
  if (!device.is_cpu()) {
    throw InvalidArgument("distcomm does not allocate " + device.str() +
                          " memory: allocate it with cudaMalloc and wrap it with Tensor::from_blob");
  }
  Tensor t;
  t.numel_ = checked_numel(shape, dtype);
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.dtype_set_ = true;
  // 64-byte alignment: whole cache lines, and what vectorised kernels like. Large tensors
  // start on a page: glibc serves a large aligned_alloc(64) from an mmap at page offset 64,
  // and the kernel copies socket data into or out of such a buffer up to 2.8x slower than at
  // offset 0 or 16 (measured: gloo's broadcast of 4 MiB over loopback, 3.8 ms at page
  // offsets 32 and 64, 2.0 ms at 0, 16, 128 or more).
  const size_t alignment = t.nbytes() >= kPageAlignedFromBytes ? 4096 : 64;
  const size_t bytes = std::max<size_t>(alignment, (t.nbytes() + alignment - 1) / alignment * alignment);
  void* p = std::aligned_alloc(alignment, bytes);
  if (!p) {
    throw TensorAllocationError("cannot allocate " + std::to_string(bytes) + " bytes of host memory for " +
                                t.describe());
  }
  t.storage_ = std::shared_ptr<void>(p, std::free);
  t.data_ = p;
  return t;
}

Tensor Tensor::zeros(std::vector<int64_t> shape, DType dtype) {
  Tensor t = empty(std::move(shape), dtype);
  std::memset(t.data_, 0, t.nbytes());
  return t;
}

Tensor Tensor::from_blob(void* data, std::vector<int64_t> shape, DType dtype, Device device) {
  Tensor t;
  t.numel_ = checked_numel(shape, dtype);
  if (!data && t.numel_ > 0) throw InvalidArgument("from_blob: null data for a non-empty tensor");
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.dtype_set_ = true;
  t.device_ = device;
  t.data_ = data;
  return t;
}

Tensor Tensor::from_blob(void* data, std::vector<int64_t> shape, DType dtype, Device device,
                         std::shared_ptr<void> owner) {
  Tensor t = from_blob(data, std::move(shape), dtype, device);
  t.storage_ = std::move(owner);
  return t;
}

Tensor Tensor::flat_slice(int64_t offset, int64_t count) const {
  // count > numel_ - offset, not offset + count > numel_: the sum can overflow.
  if (offset < 0 || count < 0 || offset > numel_ || count > numel_ - offset) {
    throw InvalidArgument("flat_slice(" + std::to_string(offset) + ", " + std::to_string(count) +
                          ") is outside a tensor of " + std::to_string(numel_) + " elements");
  }
  Tensor t = *this;
  t.data_ = data_ ? static_cast<char*>(data_) + offset * element_size(dtype_) : nullptr;
  t.shape_ = {count};
  t.numel_ = count;
  return t;
}

Tensor Tensor::reshape(std::vector<int64_t> shape) const {
  if (checked_numel(shape, dtype_) != numel_) {
    throw InvalidArgument("cannot reshape " + describe() + " to " + shape_str(shape));
  }
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::clone() const {
  require_cpu(*this, "clone");
  Tensor t = empty(shape_, dtype_);
  if (nbytes()) std::memcpy(t.data_, data_, nbytes());
  return t;
}

void Tensor::copy_from(const Tensor& src) {
  require_cpu(*this, "copy_from");
  require_cpu(src, "copy_from");
  if (src.dtype_ != dtype_ || src.numel_ != numel_) {
    throw InvalidArgument("copy_from: source " + src.describe() + " does not match destination " +
                          describe());
  }
  if (nbytes() && src.data_ != data_) std::memmove(data_, src.data_, nbytes());
}

void Tensor::fill(double value) {
  require_cpu(*this, "fill");
  dispatch_dtype(dtype_, [&](auto zero) {
    using T = decltype(zero);
    T v;
    if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      v = T(static_cast<float>(value));
    } else {
      v = static_cast<T>(value);
    }
    T* p = static_cast<T*>(data_);
    for (int64_t i = 0; i < numel_; ++i) p[i] = v;
  });
}

double Tensor::item(int64_t i) const {
  require_cpu(*this, "item");
  if (i < 0 || i >= numel_) throw InvalidArgument("item index " + std::to_string(i) + " out of range");
  return dispatch_dtype(dtype_, [&](auto zero) {
    using T = decltype(zero);
    const T v = static_cast<const T*>(data_)[i];
    if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      return static_cast<double>(static_cast<float>(v));
    } else {
      return static_cast<double>(v);
    }
  });
}

void Tensor::set_item(int64_t i, double value) {
  flat_slice(i, 1).fill(value);
}

std::vector<double> Tensor::to_doubles() const {
  std::vector<double> out(static_cast<size_t>(numel_));
  for (int64_t i = 0; i < numel_; ++i) out[static_cast<size_t>(i)] = item(i);
  return out;
}

std::string Tensor::str(int64_t max_elements) const {
  std::ostringstream os;
  os << "tensor([";
  if (is_cpu()) {
    for (int64_t i = 0; i < numel_ && i < max_elements; ++i) os << (i ? ", " : "") << item(i);
    if (numel_ > max_elements) os << ", ...";
  } else {
    os << "<" << device_.str() << " memory>";
  }
  os << "], dtype=" << dtype_name(dtype_) << ")";
  return os.str();
}

// Built by appending: it is part of every op's description, so of every op's cost.
std::string Tensor::describe() const {
  std::string s = dtype_name(dtype_);
  s += shape_str(shape_);
  s += " on ";
  if (device_.is_cpu()) {
    s += "cpu";
  } else {
    s += device_.str();
  }
  return s;
}

}  // namespace distcomm
