#include "tests/backends/conformance/conformance_values.h"

#include <cmath>
#include <sstream>
#include <type_traits>

#include <gtest/gtest.h>

namespace distcomm {
namespace conformance {
namespace internal {
namespace {

bool is_signed_type(DType dtype) { return dtype != DType::kUInt8 && dtype != DType::kBool; }

// The value `v` becomes once stored in dtype (what a backend that computes in dtype gets).
double round_to(DType dtype, double v) {
  Tensor t = Tensor::empty({1}, dtype);
  t.set_item(0, v);
  return t.item(0);
}

}  // namespace

double reduce_input(DType dtype, ReduceOp op, int rank, int64_t i) {
  if (dtype == DType::kBool) return (i * 7 + rank * 3) % 5 < 2 ? 1 : 0;
  const bool is_signed = is_signed_type(dtype);
  switch (op.kind) {
    case ReduceOp::PRODUCT: {
      int64_t k = (i + rank) % 3;
      if (!is_signed) k %= 2;
      return k == 0 ? 1 : (k == 1 ? 2 : -1);
    }
    case ReduceOp::MIN:
    case ReduceOp::MAX: {
      const int64_t v = (i * 5 + rank * 3) % 11;
      return static_cast<double>(is_signed ? v - 5 : v);
    }
    case ReduceOp::BAND:
    case ReduceOp::BOR:
    case ReduceOp::BXOR: {
      const int64_t v = (i * 37 + rank * 11 + 5) & 0x7f;
      return static_cast<double>(is_signed && (rank + i) % 2 ? -v : v);
    }
    default: {  // SUM, AVG, PREMUL_SUM
      const int64_t v = i % 7;
      return static_cast<double>((is_signed ? v - 3 : v) * (rank + 1));
    }
  }
}

double reduce_expected(DType dtype, ReduceOp op, int size, int64_t i) {
  std::vector<int64_t> inputs(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) inputs[static_cast<size_t>(r)] = static_cast<int64_t>(reduce_input(dtype, op, r, i));
  const double exact = reference_reduction(op, dtype, inputs);
  // A float AVG is what a backend computing in the dtype gets: the quotient, rounded.
  return op.kind == ReduceOp::AVG && is_floating(dtype) ? round_to(dtype, exact) : exact;
}

double reduce_tolerance(DType dtype, ReduceOp op) {
  if (op.kind != ReduceOp::AVG || !is_floating(dtype)) return 0;
  return dtype == DType::kFloat16 || dtype == DType::kBFloat16 ? 1e-2 : 1e-6;
}

double data_value(DType dtype, int64_t seed) {
  seed = seed < 0 ? -seed : seed;
  if (dtype == DType::kBool) return static_cast<double>(seed % 2);
  if (dtype == DType::kUInt8) return static_cast<double>(seed % 200);
  return static_cast<double>(seed % 200 - 100);  // within int8, exact in bfloat16
}

double guard_value(DType dtype) { return dtype == DType::kBool ? 1 : (dtype == DType::kUInt8 ? 251 : 123); }

Tensor host_tensor(DType dtype, std::vector<int64_t> shape, const ElementFn& value) {
  Tensor t = Tensor::empty(std::move(shape), dtype);
  // One dtype dispatch per tensor, not per element (Tensor::set_item makes a view each call).
  dispatch_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    T* data = static_cast<T*>(t.data());
    for (int64_t i = 0; i < t.numel(); ++i) {
      if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
        data[i] = T(static_cast<float>(value(i)));
      } else if constexpr (std::is_same_v<T, bool>) {
        data[i] = value(i) != 0;
      } else {
        data[i] = static_cast<T>(value(i));
      }
    }
  });
  return t;
}

void expect_elements(const Tensor& host_t, const ElementFn& expected, const std::string& what, double tol,
                     bool signed_zeros) {
  int64_t wrong = 0;
  std::ostringstream first;
  for (int64_t i = 0; i < host_t.numel(); ++i) {
    const double got = host_t.item(i);
    const double want = expected(i);
    const bool equal = tol == 0 ? got == want || (std::isnan(got) && std::isnan(want))
                                : std::fabs(got - want) <= tol * std::max(1.0, std::fabs(want));
    const bool same_sign = !signed_zeros || got != 0 || std::signbit(got) == std::signbit(want);
    if (equal && same_sign) continue;
    if (++wrong <= 5) first << " [" << i << "] got " << got << " want " << want << ";";
  }
  EXPECT_EQ(wrong, 0) << what << ": " << wrong << " of " << host_t.numel() << " elements differ:" << first.str();
}

Guarded::Guarded(DType dtype, int64_t count, const ElementFn& init, const Placement& p)
    : placement_(p), count_(count) {
  const double guard = guard_value(dtype);
  Tensor host_whole = host_tensor(dtype, {count + 2 * kGuard}, [&](int64_t i) {
    return i < kGuard || i >= kGuard + count ? guard : init(i - kGuard);
  });
  whole_ = p.to_device(host_whole);
  view_ = whole_.flat_slice(kGuard, count);
}

void Guarded::check(const ElementFn& expected, const std::string& what, double tol, bool signed_zeros) const {
  const Tensor host_whole = placement_.to_host(whole_);
  expect_elements(host_whole.flat_slice(kGuard, count_), expected, what, tol, signed_zeros);
  const double guard = guard_value(host_whole.dtype());
  auto guards_only = [&](int64_t) { return guard; };
  expect_elements(host_whole.flat_slice(0, kGuard), guards_only, what + " (guard elements before the tensor)");
  expect_elements(host_whole.flat_slice(kGuard + count_, kGuard), guards_only, what + " (guard elements after it)");
}

}  // namespace internal
}  // namespace conformance
}  // namespace distcomm
