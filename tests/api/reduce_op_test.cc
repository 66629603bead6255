// The CPU reduction kernels against a plain reference, for every (op, dtype) pair the
// table allows, and the refusal of the pairs it does not.
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <cstdint>

#include "api/errors.h"
#include "api/reduce_op.h"
#include "api/tensor.h"

namespace distcomm {
namespace {

const ReduceOp::Kind kAllKinds[] = {ReduceOp::SUM,  ReduceOp::AVG, ReduceOp::PRODUCT,
                                    ReduceOp::MIN,  ReduceOp::MAX, ReduceOp::BAND,
                                    ReduceOp::BOR,  ReduceOp::BXOR, ReduceOp::PREMUL_SUM};

double reference(ReduceOp::Kind k, DType t, double a, double b) {
  if (t == DType::kBool) {
    const bool x = a != 0, y = b != 0;
    switch (k) {
      case ReduceOp::SUM: case ReduceOp::MAX: case ReduceOp::BOR: return x || y;
      case ReduceOp::PRODUCT: case ReduceOp::MIN: case ReduceOp::BAND: return x && y;
      case ReduceOp::BXOR: return x != y;
      default: return 0;
    }
  }
  const auto ia = static_cast<int64_t>(a), ib = static_cast<int64_t>(b);
  switch (k) {
    case ReduceOp::SUM: case ReduceOp::AVG: case ReduceOp::PREMUL_SUM: return a + b;
    case ReduceOp::PRODUCT: return a * b;
    case ReduceOp::MIN: return std::min(a, b);
    case ReduceOp::MAX: return std::max(a, b);
    case ReduceOp::BAND: return static_cast<double>(ia & ib);
    case ReduceOp::BOR: return static_cast<double>(ia | ib);
    case ReduceOp::BXOR: return static_cast<double>(ia ^ ib);
  }
  return 0;
}

TEST(ReduceOp, EveryAllowedPairMatchesTheReference) {
  int pairs = 0;
  for (int d = 0; d < kNumDTypes; ++d) {
    const auto dtype = static_cast<DType>(d);
    for (auto kind : kAllKinds) {
      ReduceOp op(kind);
      if (!reduce_supported(op, dtype)) {
        EXPECT_THROW(check_reduce_supported(op, dtype), InvalidArgument);
        continue;
      }
      ++pairs;
      const int64_t n = 37;  // odd: catches vector-remainder bugs
      Tensor acc = Tensor::empty({n}, dtype), in = Tensor::empty({n}, dtype);
      std::vector<double> expect(n);
      for (int64_t i = 0; i < n; ++i) {
        const double a = dtype == DType::kBool ? i % 2 : static_cast<double>(i % 7 + 1);
        const double b = dtype == DType::kBool ? (i / 2) % 2 : static_cast<double>((i * 3) % 5 + 1);
        acc.set_item(i, a);
        in.set_item(i, b);
        expect[i] = reference(kind, dtype, a, b);
      }
      reduce_into(acc.data(), in.data(), n, dtype, op);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(acc.item(i), expect[i]) << dtype_name(dtype) << " " << op.name() << " at " << i;
      }
    }
  }
  EXPECT_GT(pairs, 50);
}

TEST(ReduceOp, RefusesWhatMakesNoSense) {
  std::string why;
  EXPECT_FALSE(reduce_supported(ReduceOp::BXOR, DType::kFloat32, &why));
  EXPECT_NE(why.find("bitwise"), std::string::npos);
  EXPECT_FALSE(reduce_supported(ReduceOp::AVG, DType::kBool));
  EXPECT_FALSE(reduce_supported(ReduceOp::premul_sum(2), DType::kInt32));
  EXPECT_TRUE(reduce_supported(ReduceOp::BAND, DType::kUInt8));
}

// A kind cast from a stray integer is no op at all: refused for every dtype, naming the
// value, rather than reaching a kernel ("internal: reduce_typed reached an unsupported op").
TEST(ReduceOp, RefusesAKindOutsideTheEnum) {
  ReduceOp stray;
  stray.kind = static_cast<ReduceOp::Kind>(42);
  EXPECT_FALSE(is_reduce_op_kind(stray.kind));
  for (ReduceOp::Kind k : {ReduceOp::SUM, ReduceOp::AVG, ReduceOp::PRODUCT, ReduceOp::MIN, ReduceOp::MAX,
                           ReduceOp::BAND, ReduceOp::BOR, ReduceOp::BXOR, ReduceOp::PREMUL_SUM}) {
    EXPECT_TRUE(is_reduce_op_kind(k)) << ReduceOp(k).name();
  }
  for (DType dtype : {DType::kFloat32, DType::kInt64, DType::kBool}) {
    std::string why;
    EXPECT_FALSE(reduce_supported(stray, dtype, &why)) << dtype_name(dtype);
    EXPECT_NE(why.find("reduce op kind 42 is not a ReduceOp::Kind"), std::string::npos) << why;
  }
  float acc = 1, in = 2;
  EXPECT_THROW(reduce_into(&acc, &in, 1, DType::kFloat32, stray), InvalidArgument);
  EXPECT_EQ(acc, 1) << "a refused reduction wrote its accumulator";
}

TEST(ReduceOp, MinMaxPropagateNaN) {
  float a[2] = {1, NAN}, b[2] = {NAN, 1};
  reduce_into(a, b, 2, DType::kFloat32, ReduceOp::MIN);
  EXPECT_TRUE(std::isnan(a[0]));
  EXPECT_TRUE(std::isnan(a[1]));
}

// Integer SUM and PRODUCT wrap on overflow (reduce_op.h), as NCCL's do. Computed in the
// signed type, int32/int64 overflow is undefined behaviour: this test's results held by
// luck before, and --config=ubsan reported "signed integer overflow" in reduce_op.cc.
TEST(ReduceOp, IntegerSumAndProductWrapOnOverflow) {
  int32_t a32[2] = {INT32_MAX, INT32_MIN}, b32[2] = {1, -1};
  reduce_into(a32, b32, 2, DType::kInt32, ReduceOp::SUM);
  EXPECT_EQ(a32[0], INT32_MIN);
  EXPECT_EQ(a32[1], INT32_MAX);
  int64_t a64[1] = {INT64_MAX}, b64[1] = {2};
  reduce_into(a64, b64, 1, DType::kInt64, ReduceOp::PRODUCT);
  EXPECT_EQ(a64[0], -2);
  int32_t p32[1] = {65536}, q32[1] = {65536};
  reduce_into(p32, q32, 1, DType::kInt32, ReduceOp::PRODUCT);
  EXPECT_EQ(p32[0], 0);
  uint8_t u8[1] = {200}, v8[1] = {100};
  reduce_into(u8, v8, 1, DType::kUInt8, ReduceOp::SUM);
  EXPECT_EQ(u8[0], 44);
}

TEST(ReduceOp, ScaleAndDivide) {
  Tensor t = Tensor::of<float>({2, 4});
  scale_in_place(t.data(), 2, t.dtype(), 0.25);
  EXPECT_EQ(t.to_doubles(), (std::vector<double>{0.5, 1}));
  Tensor i = Tensor::of<int32_t>({7, -7});
  divide_in_place(i.data(), 2, i.dtype(), 2);
  EXPECT_EQ(i.to_doubles(), (std::vector<double>{3, -3}));  // truncation, like ncclAvg
  Tensor h = Tensor::empty({1}, DType::kBFloat16);
  h.set_item(0, 6);
  divide_in_place(h.data(), 1, h.dtype(), 3);
  EXPECT_EQ(h.item(0), 2);
  EXPECT_THROW(scale_in_place(i.data(), 2, i.dtype(), 0.5), InvalidArgument);
}

TEST(ReduceOp, ParseNames) {
  EXPECT_EQ(parse_reduce_op("max").kind, ReduceOp::MAX);
  EXPECT_EQ(parse_reduce_op("prod").kind, ReduceOp::PRODUCT);
  EXPECT_THROW(parse_reduce_op("median"), InvalidArgument);
}

// The reference the conformance suite, the mpi tests and the bench check results against.
TEST(ReferenceReduction, FollowsEachOpsDefinition) {
  const std::vector<int64_t> in = {3, -5, 6};
  EXPECT_EQ(reference_reduction(ReduceOp::SUM, DType::kInt32, in), 4);
  EXPECT_EQ(reference_reduction(ReduceOp::PRODUCT, DType::kInt64, in), -90);
  EXPECT_EQ(reference_reduction(ReduceOp::MIN, DType::kFloat32, in), -5);
  EXPECT_EQ(reference_reduction(ReduceOp::MAX, DType::kInt8, in), 6);
  EXPECT_EQ(reference_reduction(ReduceOp::BAND, DType::kInt32, {6, 3}), 2);
  EXPECT_EQ(reference_reduction(ReduceOp::BOR, DType::kInt32, {6, 3}), 7);
  EXPECT_EQ(reference_reduction(ReduceOp::BXOR, DType::kInt32, {6, 3}), 5);
  EXPECT_EQ(reference_reduction(ReduceOp::AVG, DType::kInt32, {-7, 0}), -3) << "integer avg truncates toward zero";
  EXPECT_EQ(reference_reduction(ReduceOp::AVG, DType::kFloat64, {-7, 0}), -3.5);
  EXPECT_EQ(reference_reduction(ReduceOp::premul_sum(0.5), DType::kFloat32, in), 2);
  // bool: sum and max are "any", product and min "all", bxor the parity.
  EXPECT_EQ(reference_reduction(ReduceOp::SUM, DType::kBool, {0, 1, 1}), 1);
  EXPECT_EQ(reference_reduction(ReduceOp::MAX, DType::kBool, {0, 0}), 0);
  EXPECT_EQ(reference_reduction(ReduceOp::PRODUCT, DType::kBool, {1, 0, 1}), 0);
  EXPECT_EQ(reference_reduction(ReduceOp::MIN, DType::kBool, {1, 1}), 1);
  EXPECT_EQ(reference_reduction(ReduceOp::BXOR, DType::kBool, {1, 1, 1}), 1);
  EXPECT_THROW(reference_reduction(ReduceOp::SUM, DType::kInt32, {}), InvalidArgument);
}

}  // namespace
}  // namespace distcomm
