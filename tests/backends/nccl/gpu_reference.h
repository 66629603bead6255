// Host-side reference data and results for the nccl GPU tests: each rank can compute
// every rank's input, hence the expected result, without talking to anyone.
#pragma once

#include <string>
#include <vector>

#include "api/reduce_op.h"
#include "api/tensor.h"

namespace distcomm {
namespace testing {

// Rank r's input of n elements for `op`: small integers, exact in every dtype and under
// every reduction of up to 4 ranks (products stay in {1, 2}; AVG inputs are not negative,
// so integer division truncates the same way everywhere).
Tensor rank_input(int rank, int64_t n, DType dtype, ReduceOp op = ReduceOp::SUM);

// The reduction of every rank's input, as the group should compute it.
Tensor reference_reduce(const std::vector<Tensor>& inputs, ReduceOp op);

// "" when got equals want (within rounding for float results of AVG / PREMUL_SUM),
// else what differs first.
std::string compare(const Tensor& got, const Tensor& want);

// The reductions to sweep for a dtype: what NCCL can do with it.
std::vector<ReduceOp> reductions_for(DType dtype);

}  // namespace testing
}  // namespace distcomm
