// The dtype and reduce-op tables the nccl backend hands to NCCL (no GPU needed).
#include "backends/nccl/nccl_types.h"

#include <gtest/gtest.h>

#include "api/errors.h"

namespace distcomm {
namespace nccl {
namespace {

TEST(NcclTypesTest, EveryDTypeHasAnNcclTypeOfTheSameSize) {
  struct Row {
    DType dtype;
    ncclDataType_t nccl;
  };
  const Row rows[] = {{DType::kFloat32, ncclFloat32}, {DType::kFloat64, ncclFloat64},
                      {DType::kFloat16, ncclFloat16}, {DType::kBFloat16, ncclBfloat16},
                      {DType::kInt8, ncclInt8},       {DType::kUInt8, ncclUint8},
                      {DType::kInt32, ncclInt32},     {DType::kInt64, ncclInt64},
                      {DType::kBool, ncclUint8}};
  ASSERT_EQ(sizeof(rows) / sizeof(rows[0]), static_cast<size_t>(kNumDTypes));
  for (const Row& r : rows) EXPECT_EQ(nccl_dtype(r.dtype), r.nccl) << dtype_name(r.dtype);
}

TEST(NcclTypesTest, ArithmeticOpsMapToNcclOps) {
  EXPECT_EQ(builtin_redop(ReduceOp::SUM, DType::kFloat32), ncclSum);
  EXPECT_EQ(builtin_redop(ReduceOp::PRODUCT, DType::kInt64), ncclProd);
  EXPECT_EQ(builtin_redop(ReduceOp::MIN, DType::kBFloat16), ncclMin);
  EXPECT_EQ(builtin_redop(ReduceOp::MAX, DType::kUInt8), ncclMax);
  EXPECT_EQ(builtin_redop(ReduceOp::AVG, DType::kFloat16), ncclAvg);
  EXPECT_EQ(builtin_redop(ReduceOp::AVG, DType::kInt32), ncclAvg);  // truncates, as reduce_into does
}

TEST(NcclTypesTest, BoolReducesAsAnyOrAllOverBytes) {
  // A byte sum of booleans could pass 1 (or wrap to 0): "any" is max, "all" is min.
  EXPECT_EQ(builtin_redop(ReduceOp::SUM, DType::kBool), ncclMax);
  EXPECT_EQ(builtin_redop(ReduceOp::MAX, DType::kBool), ncclMax);
  EXPECT_EQ(builtin_redop(ReduceOp::BOR, DType::kBool), ncclMax);
  EXPECT_EQ(builtin_redop(ReduceOp::PRODUCT, DType::kBool), ncclMin);
  EXPECT_EQ(builtin_redop(ReduceOp::MIN, DType::kBool), ncclMin);
  EXPECT_EQ(builtin_redop(ReduceOp::BAND, DType::kBool), ncclMin);
}

TEST(NcclTypesTest, WhatNcclCannotReduceIsRefusedWithTheReason) {
  std::string why;
  EXPECT_FALSE(nccl_reduces(ReduceOp::BAND, DType::kInt32, &why));
  EXPECT_NE(why.find("NCCL has no bitwise reductions"), std::string::npos) << why;
  EXPECT_FALSE(nccl_reduces(ReduceOp::BXOR, DType::kBool, &why));
  EXPECT_FALSE(nccl_reduces(ReduceOp::premul_sum(0.5), DType::kInt64, &why));
  EXPECT_NE(why.find("premul_sum needs a floating-point tensor"), std::string::npos) << why;
  EXPECT_TRUE(nccl_reduces(ReduceOp::premul_sum(0.5), DType::kBFloat16));
  EXPECT_THROW(builtin_redop(ReduceOp::BXOR, DType::kUInt8), InvalidArgument);
  // PREMUL_SUM is made on a communicator, never taken for a built-in.
  EXPECT_THROW(builtin_redop(ReduceOp::premul_sum(2.0), DType::kFloat32), InvalidArgument);
}

TEST(NcclTypesTest, MakeRedopCreatesNothingForBuiltIns) {
  bool created = true;
  EXPECT_EQ(make_redop(ReduceOp::MAX, DType::kFloat64, nullptr, &created), ncclMax);
  EXPECT_FALSE(created);
}

}  // namespace
}  // namespace nccl
}  // namespace distcomm
