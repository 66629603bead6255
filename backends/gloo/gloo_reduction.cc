#include "backends/gloo/gloo_reduction.h"

#include <gloo/math.h>

#include "backends/gloo/gloo_sum_kernels.h"

namespace distcomm {
namespace gloo {
namespace {

// reduce_into is acc (op)= in; gloo asks for c = a (op) b. Every op is commutative, so an
// aliased output reduces in place.
void combine_with_distcomm_kernel(void* c, const void* a, const void* b, size_t n, DType dtype, ReduceOp::Kind k) {
  if (c == a) {
    reduce_into(c, b, n, dtype, ReduceOp(k));
  } else if (c == b) {
    reduce_into(c, a, n, dtype, ReduceOp(k));
  } else {
    std::memcpy(c, a, n * element_size(dtype));
    reduce_into(c, b, n, dtype, ReduceOp(k));
  }
}

// gloo/math.h overloads each kernel (3- and 4-argument forms): name the one wanted.
using GlooKernel = void (*)(void*, const void*, const void*, size_t);

template <typename T>
ReduceFn gloo_kernel(ReduceOp::Kind kind) {
  switch (kind) {
    case ReduceOp::SUM:
      if constexpr (has_sum_kernel<T>()) return &add_arrays<T>;  // vectorised (gloo_sum_kernels.h)
      return static_cast<GlooKernel>(&::gloo::sum<T>);
    case ReduceOp::PRODUCT: return static_cast<GlooKernel>(&::gloo::product<T>);
    case ReduceOp::MIN: return static_cast<GlooKernel>(&::gloo::min<T>);
    case ReduceOp::MAX: return static_cast<GlooKernel>(&::gloo::max<T>);
    default: return nullptr;
  }
}

}  // namespace

ReduceFn reduce_function(DType dtype, ReduceOp op) {
  const ReduceOp::Kind kind = combining_kind(op);
  ReduceFn native = dispatch_dtype(dtype, [&](auto zero) -> ReduceFn {
    using T = decltype(zero);
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
      if (gloo_kernel_fits<T>(kind)) return gloo_kernel<T>(kind);
    }
    return nullptr;
  });
  if (native) return native;
  // Two bytes of capture: fits std::function's inline storage, so no allocation per op.
  return [dtype, kind](void* c, const void* a, const void* b, size_t n) {
    combine_with_distcomm_kernel(c, a, b, n, dtype, kind);
  };
}

}  // namespace gloo
}  // namespace distcomm
