#include "tests/backends/nccl/gpu_reference.h"

#include <cmath>
#include <sstream>

namespace distcomm {
namespace testing {

Tensor rank_input(int rank, int64_t n, DType dtype, ReduceOp op) {
  Tensor t = Tensor::empty({n}, dtype);
  const bool may_be_negative = dtype != DType::kUInt8 && dtype != DType::kBool && op.kind != ReduceOp::AVG;
  for (int64_t i = 0; i < n; ++i) {
    double v;
    if (dtype == DType::kBool) {
      v = (rank + i) % 2;
    } else if (op.kind == ReduceOp::PRODUCT) {
      v = 1 + (rank + i) % 2;
    } else {
      v = static_cast<double>((i % 5 + 1) * (rank + 1));
      if (may_be_negative && i % 3 == 0) v = -v;
    }
    t.set_item(i, v);
  }
  return t;
}

Tensor reference_reduce(const std::vector<Tensor>& inputs, ReduceOp op) {
  std::vector<Tensor> scaled;
  for (const Tensor& in : inputs) {
    scaled.push_back(in.clone());
    if (op.kind == ReduceOp::PREMUL_SUM) {
      scale_in_place(scaled.back().data(), static_cast<size_t>(in.numel()), in.dtype(), op.factor);
    }
  }
  Tensor acc = scaled[0];
  for (size_t r = 1; r < scaled.size(); ++r) {
    reduce_into(acc.data(), scaled[r].data(), static_cast<size_t>(acc.numel()), acc.dtype(), op);
  }
  if (op.kind == ReduceOp::AVG) {
    divide_in_place(acc.data(), static_cast<size_t>(acc.numel()), acc.dtype(), static_cast<int64_t>(inputs.size()));
  }
  return acc;
}

std::string compare(const Tensor& got, const Tensor& want) {
  if (got.numel() != want.numel() || got.dtype() != want.dtype()) {
    return "got " + got.describe() + ", want " + want.describe();
  }
  const bool reduced16 = got.dtype() == DType::kFloat16 || got.dtype() == DType::kBFloat16;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double g = got.item(i), w = want.item(i);
    // NCCL averages floats as a premultiplied sum: the same value up to rounding.
    const double tolerance = is_floating(got.dtype()) ? (reduced16 ? 1e-2 : 1e-6) * (1 + std::fabs(w)) : 0;
    if (std::fabs(g - w) > tolerance) {
      std::ostringstream os;
      os << "element " << i << " of " << got.numel() << ": got " << g << ", want " << w;
      return os.str();
    }
  }
  return "";
}

std::vector<ReduceOp> reductions_for(DType dtype) {
  if (dtype == DType::kBool) {
    return {ReduceOp::SUM, ReduceOp::PRODUCT, ReduceOp::MIN, ReduceOp::MAX, ReduceOp::BAND, ReduceOp::BOR};
  }
  std::vector<ReduceOp> ops = {ReduceOp::SUM, ReduceOp::PRODUCT, ReduceOp::MIN, ReduceOp::MAX, ReduceOp::AVG};
  if (is_floating(dtype)) ops.push_back(ReduceOp::premul_sum(0.5));
  return ops;
}

}  // namespace testing
}  // namespace distcomm
