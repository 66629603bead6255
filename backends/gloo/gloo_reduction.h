// The element-wise reductions gloo's collectives apply.
//
// gloo's own kernels (gloo/math.h) serve sum and product of float, double and the integer
// types, and min/max of the integer types. Everything else goes through distcomm's
// reduce_into: float16/bfloat16 (rounded once per step, like the other backends), bool,
// the bitwise ops, and min/max of floats (so that NaN propagates on every backend, which
// gloo's std::min/std::max do not do). AVG and PREMUL_SUM reduce as SUM: the ProcessGroup
// applies their scaling (GlooBackend::reduces_natively says so).
#pragma once

#include <cstddef>
#include <cstring>
#include <functional>
#include <type_traits>

#include <gloo/algorithm.h>

#include "api/dtype.h"
#include "api/reduce_op.h"
#include "backends/gloo/gloo_sum_kernels.h"

namespace distcomm {
namespace gloo {

// c[i] = a[i] (op) b[i] for i < n; c may alias a or b. gloo::AllreduceOptions::Func's shape.
using ReduceFn = std::function<void(void*, const void*, const void*, size_t)>;

ReduceFn reduce_function(DType dtype, ReduceOp op);

// SUM for AVG and PREMUL_SUM (see the header comment).
inline ReduceOp::Kind combining_kind(ReduceOp op) {
  return op.kind == ReduceOp::AVG || op.kind == ReduceOp::PREMUL_SUM ? ReduceOp::SUM : op.kind;
}

// --- For gloo's algorithm classes (AllreduceRingChunked, AllreduceHalvingDoubling), which
// take a ReductionFunction<T> holding a plain function pointer. T is the storage type the
// class is instantiated with (uint8_t for bool: the classes keep std::vector<T>), D the
// dtype whose semantics the reduction has.

template <typename T, DType D, ReduceOp::Kind K>
void reduce_with_distcomm_kernel(T* acc, const T* in, size_t n) {
  reduce_into(acc, in, n, D, ReduceOp(K));
}

template <typename T, DType D, ReduceOp::Kind K>
const ::gloo::ReductionFunction<T>* distcomm_reduction() {
  static const ::gloo::ReductionFunction<T> fn(::gloo::CUSTOM, &reduce_with_distcomm_kernel<T, D, K>);
  return &fn;
}

// True when gloo's own kernel for (T, kind) has distcomm's semantics (see header comment).
template <typename T>
constexpr bool gloo_kernel_fits(ReduceOp::Kind kind) {
  constexpr bool numeric = std::is_arithmetic_v<T> && !std::is_same_v<T, bool>;
  if (kind == ReduceOp::SUM || kind == ReduceOp::PRODUCT) return numeric;
  if (kind == ReduceOp::MIN || kind == ReduceOp::MAX) return numeric && std::is_integral_v<T>;
  return false;
}

template <typename T, DType D>
const ::gloo::ReductionFunction<T>* reduction_for_algorithm(ReduceOp op) {
  const ReduceOp::Kind kind = combining_kind(op);
  if constexpr (D != DType::kBool && std::is_arithmetic_v<T>) {
    if (gloo_kernel_fits<T>(kind)) {
      switch (kind) {
        case ReduceOp::SUM:
          if constexpr (has_sum_kernel<T>()) {
            static const ::gloo::ReductionFunction<T> vectorised(::gloo::SUM, &add_into<T>);
            return &vectorised;
          }
          return ::gloo::ReductionFunction<T>::sum;
        case ReduceOp::PRODUCT: return ::gloo::ReductionFunction<T>::product;
        case ReduceOp::MIN: return ::gloo::ReductionFunction<T>::min;
        case ReduceOp::MAX: return ::gloo::ReductionFunction<T>::max;
        default: break;
      }
    }
  }
  switch (kind) {
    case ReduceOp::PRODUCT: return distcomm_reduction<T, D, ReduceOp::PRODUCT>();
    case ReduceOp::MIN: return distcomm_reduction<T, D, ReduceOp::MIN>();
    case ReduceOp::MAX: return distcomm_reduction<T, D, ReduceOp::MAX>();
    case ReduceOp::BAND: return distcomm_reduction<T, D, ReduceOp::BAND>();
    case ReduceOp::BOR: return distcomm_reduction<T, D, ReduceOp::BOR>();
    case ReduceOp::BXOR: return distcomm_reduction<T, D, ReduceOp::BXOR>();
    default: return distcomm_reduction<T, D, ReduceOp::SUM>();
  }
}

}  // namespace gloo
}  // namespace distcomm
