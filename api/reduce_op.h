// Reduction operators, and the CPU kernels that apply them.
//
// Backends whose library lacks an (op, dtype) pair -- gloo has no bfloat16, MPI no AVG --
// combine buffers with these kernels instead of refusing, so every backend supports the
// same table (see reduce_supported).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "api/dtype.h"

namespace distcomm {

struct ReduceOp {
  enum Kind : uint8_t { SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR, PREMUL_SUM };

  Kind kind = SUM;
  // PREMUL_SUM only: every input is multiplied by this before the sum (c10d's
  // _make_nccl_premul_sum; DDP uses it to fold the 1/world_size into the reduction).
  double factor = 1.0;

  ReduceOp(Kind k = SUM) : kind(k) {}  // NOLINT: ReduceOp::MAX reads naturally at call sites
  static ReduceOp premul_sum(double factor) {
    ReduceOp op(PREMUL_SUM);
    op.factor = factor;
    return op;
  }
  const char* name() const;  // "sum", "avg", "premul_sum", ...
};

// Whether kind is one of ReduceOp::Kind's values (a kind cast from a stray integer is not),
// and their names as a list for messages: "sum, avg, prod, ...".
bool is_reduce_op_kind(ReduceOp::Kind kind);
extern const char* const kReduceOpKindNames;

// Parses "sum", "avg", "prod"/"product", "min", "max", "band", "bor", "bxor".
ReduceOp parse_reduce_op(const std::string& name);

// Whether op makes sense for dtype. Bitwise ops need integers or bool; AVG and PREMUL_SUM
// need numbers (AVG on integers truncates, as NCCL's ncclAvg does; PREMUL_SUM needs floats).
bool reduce_supported(ReduceOp op, DType dtype, std::string* why = nullptr);
// Whether AVG of dtype scales every input by 1/size before summing (float16, bfloat16), as
// NCCL's ncclAvg does for floating types: their sums leave the type's range long before the
// average does (3 ranks of float16 30000 sum to inf). float32 and float64 divide after the
// sum, which keeps averages of whole numbers exact; integers sum in their type (wrapping on
// overflow, as NCCL's do) and then divide, truncating toward zero. A backend that reduces
// AVG natively keeps to this.
bool avg_scales_inputs(DType dtype);
// Throws InvalidArgument with the reason when !reduce_supported.
void check_reduce_supported(ReduceOp op, DType dtype);

// acc[i] = acc[i] (op) in[i] for i < count. AVG and PREMUL_SUM combine with +: their
// scaling is applied by premultiply / finish_average around the combination.
void reduce_into(void* acc, const void* in, size_t count, DType dtype, ReduceOp op);

// data[i] *= factor (floats; PREMUL_SUM's input scaling).
void scale_in_place(void* data, size_t count, DType dtype, double factor);

// data[i] /= divisor (AVG after the sum; integer division for integer types).
void divide_in_place(void* data, size_t count, DType dtype, int64_t divisor);

// The reduction of one element over the ranks by op's definition, to check what a backend
// computed (tests, the bench): `inputs` holds every rank's value, small integers exact in
// every dtype. bool inputs are 0/1 (sum and max are "any", product and min "all"); AVG
// truncates for integer dtypes, as NCCL's ncclAvg does, and divides exactly for floating
// ones; PREMUL_SUM is the sum times op.factor.
double reference_reduction(ReduceOp op, DType dtype, const std::vector<int64_t>& inputs);

}  // namespace distcomm
