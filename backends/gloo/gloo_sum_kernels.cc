#include "backends/gloo/gloo_sum_kernels.h"

#include <type_traits>

namespace distcomm {
namespace gloo {
namespace {

// Distinct pointers by contract (__restrict), so the compiler vectorises without checks.
template <typename T>
void add_distinct(T* __restrict out, const T* __restrict a, const T* __restrict b, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<T>(a[i] + b[i]);
}

template <typename T>
void add_in_place(T* __restrict acc, const T* __restrict in, size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] = static_cast<T>(acc[i] + in[i]);
}

}  // namespace

template <typename T>
void add_arrays(void* c, const void* a, const void* b, size_t n) {
  T* out = static_cast<T*>(c);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  if (x == y) {
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<T>(x[i] + x[i]);  // not worth a kernel
  } else if (out == x) {
    add_in_place(out, y, n);
  } else if (out == y) {
    add_in_place(out, x, n);
  } else {
    add_distinct(out, x, y, n);
  }
}

template <typename T>
void add_into(T* acc, const T* in, size_t n) {
  add_in_place(acc, in, n);
}

#define DISTCOMM_GLOO_DEFINE_SUM(T)                                        \
  template void add_arrays<T>(void*, const void*, const void*, size_t); \
  template void add_into<T>(T*, const T*, size_t);
DISTCOMM_GLOO_SUM_TYPES(DISTCOMM_GLOO_DEFINE_SUM)
#undef DISTCOMM_GLOO_DEFINE_SUM

}  // namespace gloo
}  // namespace distcomm
