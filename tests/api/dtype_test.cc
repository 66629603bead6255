#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "api/dtype.h"
#include "api/errors.h"
#include "api/half.h"

namespace distcomm {
namespace {

TEST(DType, SizesAndNames) {
  EXPECT_EQ(element_size(DType::kFloat32), 4u);
  EXPECT_EQ(element_size(DType::kFloat64), 8u);
  EXPECT_EQ(element_size(DType::kFloat16), 2u);
  EXPECT_EQ(element_size(DType::kBFloat16), 2u);
  EXPECT_EQ(element_size(DType::kInt8), 1u);
  EXPECT_EQ(element_size(DType::kUInt8), 1u);
  EXPECT_EQ(element_size(DType::kInt32), 4u);
  EXPECT_EQ(element_size(DType::kInt64), 8u);
  EXPECT_EQ(element_size(DType::kBool), 1u);
  for (int i = 0; i < kNumDTypes; ++i) {
    const auto t = static_cast<DType>(i);
    EXPECT_EQ(parse_dtype(dtype_name(t)), t);
  }
  EXPECT_EQ(parse_dtype("bf16"), DType::kBFloat16);
  EXPECT_THROW(parse_dtype("float128"), InvalidArgument);
}

// Floating or integral, never both; bool counts as integral.
TEST(DType, KindOfEveryDType) {
  for (DType t : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16}) {
    EXPECT_TRUE(is_floating(t)) << dtype_name(t);
    EXPECT_FALSE(is_integral(t)) << dtype_name(t);
  }
  for (DType t : {DType::kInt8, DType::kUInt8, DType::kInt32, DType::kInt64, DType::kBool}) {
    EXPECT_TRUE(is_integral(t)) << dtype_name(t);
    EXPECT_FALSE(is_floating(t)) << dtype_name(t);
  }
}

// Every one of the 65536 half bit patterns survives half -> float -> half (NaNs stay NaN).
TEST(Half, RoundTripsEveryBitPattern) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float f = Half::to_float(static_cast<uint16_t>(b));
    const uint16_t back = Half::from_float(f);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(Half::to_float(back))) << b;
    } else {
      EXPECT_EQ(back, b) << "bits " << b << " float " << f;
    }
  }
}

TEST(Half, KnownValuesAndRounding) {
  EXPECT_EQ(Half::from_float(1.0f), 0x3c00);
  EXPECT_EQ(Half::from_float(-2.0f), 0xc000);
  EXPECT_EQ(Half::from_float(65504.0f), 0x7bff);           // largest finite
  EXPECT_EQ(Half::from_float(65520.0f), 0x7c00);           // rounds to infinity
  EXPECT_EQ(Half::from_float(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(Half::from_float(std::ldexp(1.0f, -25)), 0x0000);  // tie -> even (0)
  EXPECT_EQ(Half::from_float(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 ulp -> 2 (even)
  // 1 + 2^-11 is halfway between 1 and the next half: ties to even gives 1.
  EXPECT_EQ(Half::from_float(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(Half::from_float(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(Half::from_float(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_TRUE(std::isnan(Half::to_float(Half::from_float(std::nanf("")))));
}

TEST(BFloat16, RoundTripsAndRounds) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float f = BFloat16::to_float(static_cast<uint16_t>(b));
    if (!std::isnan(f)) {
      EXPECT_EQ(BFloat16::from_float(f), b);
    }
  }
  EXPECT_EQ(BFloat16::from_float(1.0f), 0x3f80);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even gives 1.
  EXPECT_EQ(BFloat16::from_float(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(BFloat16::from_float(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_TRUE(std::isnan(BFloat16::to_float(BFloat16::from_float(std::nanf("")))));
}

}  // namespace
}  // namespace distcomm
