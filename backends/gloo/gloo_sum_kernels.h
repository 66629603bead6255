// Element-wise sums for gloo's collectives, compiled with -O3 whatever the build mode
// (BUILD): gloo's own gloo::sum<T> is a header template, so it gets the flags of the file
// that names it, and at -O2 GCC does not vectorise its loop (its output may alias an
// input), and at -O0 it is several times slower still (docs/backends.md, "gloo", has the figures).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace distcomm {
namespace gloo {

// c[i] = a[i] + b[i] for i < n; c may be a or b (the two forms gloo uses), or neither.
template <typename T>
void add_arrays(void* c, const void* a, const void* b, size_t n);
// acc[i] += in[i]: gloo::ReductionFunction's form.
template <typename T>
void add_into(T* acc, const T* in, size_t n);

#define DISTCOMM_GLOO_SUM_TYPES(X) X(float) X(double) X(int8_t) X(uint8_t) X(int32_t) X(int64_t)
#define DISTCOMM_GLOO_DECLARE_SUM(T)                                      \
  extern template void add_arrays<T>(void*, const void*, const void*, size_t); \
  extern template void add_into<T>(T*, const T*, size_t);
DISTCOMM_GLOO_SUM_TYPES(DISTCOMM_GLOO_DECLARE_SUM)
#undef DISTCOMM_GLOO_DECLARE_SUM

// Whether add_arrays<T> / add_into<T> exist for T.
template <typename T>
constexpr bool has_sum_kernel() {
#define DISTCOMM_GLOO_IS(T2) std::is_same_v<T, T2> ||
  return DISTCOMM_GLOO_SUM_TYPES(DISTCOMM_GLOO_IS) false;
#undef DISTCOMM_GLOO_IS
}

}  // namespace gloo
}  // namespace distcomm
