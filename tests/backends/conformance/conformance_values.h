// Inputs, references and comparisons shared by the conformance checks (not for backends).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "api/reduce_op.h"
#include "api/tensor.h"
#include "tests/backends/conformance/conformance.h"

namespace distcomm {
namespace conformance {
namespace internal {

using ElementFn = std::function<double(int64_t)>;

// What `rank` contributes at element i to a reduction with op. Small integers, chosen per
// op so that every result is exact in every dtype: sums of (i % 7 - 3) * (rank + 1),
// products of {1, 2, -1}, min/max over [-5, 5], bitwise over 7-bit patterns (negated on
// odd ranks of signed types), and a mix of true/false for bool.
double reduce_input(DType dtype, ReduceOp op, int rank, int64_t i);
// The reduction over ranks 0..size-1 of reduce_input at i, by the op's definition
// (bool sum is "any", AVG on integers truncates, PREMUL_SUM scales each input first).
double reduce_expected(DType dtype, ReduceOp op, int size, int64_t i);
// Relative tolerance for comparing a reduction: 0 (exact) except AVG on floats, which a
// backend may compute as a scaled sum.
double reduce_tolerance(DType dtype, ReduceOp op);

// A value exactly representable in dtype, from any integer seed (for data movement).
double data_value(DType dtype, int64_t seed);
// The value guard elements hold; no op result takes it by accident in these tests.
double guard_value(DType dtype);

Tensor host_tensor(DType dtype, std::vector<int64_t> shape, const ElementFn& value);

// One EXPECT for the whole tensor: passes when t[i] == expected(i) for every i (relative
// tolerance tol), else names the count and the first few mismatches.
// With `signed_zeros`, a zero must also carry the expected sign (MIN and MAX tell -0 from +0).
void expect_elements(const Tensor& host_t, const ElementFn& expected, const std::string& what, double tol = 0,
                     bool signed_zeros = false);

// A device tensor of `count` elements between guard elements: ops get view(); check()
// compares the view and checks that the guards are unchanged (no write outside).
class Guarded {
 public:
  Guarded(DType dtype, int64_t count, const ElementFn& init, const Placement& p);
  Tensor& view() { return view_; }
  void check(const ElementFn& expected, const std::string& what, double tol = 0, bool signed_zeros = false) const;

 private:
  static constexpr int64_t kGuard = 3;
  const Placement& placement_;
  int64_t count_;
  Tensor whole_;  // on the device
  Tensor view_;
};

}  // namespace internal
}  // namespace conformance
}  // namespace distcomm
