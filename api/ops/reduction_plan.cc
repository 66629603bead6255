#include "api/ops/reduction_plan.h"

#include "api/errors.h"

namespace distcomm {

ReductionPlan ReductionPlan::make(const std::string& where_prefix, OpType op, Backend& b, ReduceOp requested,
                                  const Tensor& t, int group_size) {
  ReductionPlan plan;
  plan.run = requested;
  const bool scaled = requested.kind == ReduceOp::AVG || requested.kind == ReduceOp::PREMUL_SUM;
  if (!scaled || b.reduces_natively(requested, t.dtype())) return plan;
  // The host does the scaling, so the tensors must be on the host.
  if (!t.is_cpu()) {
    throw InvalidArgument(where_prefix + op_type_name(op) + ": backend " + b.name() + " has no " + requested.name() +
                          " for " + t.describe());
  }
  plan.run = ReduceOp::SUM;
  plan.premultiply_by = requested.kind == ReduceOp::PREMUL_SUM ? requested.factor : 1.0;
  plan.divide_by = requested.kind == ReduceOp::AVG ? group_size : 1;
  if (requested.kind == ReduceOp::AVG && avg_scales_inputs(t.dtype())) {
    plan.premultiply_by = 1.0 / group_size;
    plan.divide_by = 1;
  }
  return plan;
}

Tensor ReductionPlan::premultiplied(const Tensor& input, bool in_place) const {
  if (premultiply_by == 1.0) return input;
  Tensor scaled = in_place ? input : input.clone();
  premultiply_in_place(scaled);
  return scaled;
}

void ReductionPlan::premultiply_in_place(Tensor& t) const {
  if (premultiply_by == 1.0) return;
  scale_in_place(t.data(), static_cast<size_t>(t.numel()), t.dtype(), premultiply_by);
}

WorkPtr ReductionPlan::divided_after(const WorkPtr& work, const Tensor& result) const {
  if (divide_by == 1) return work;
  return then(work, [out = result, n = divide_by]() mutable {
    divide_in_place(out.data(), static_cast<size_t>(out.numel()), out.dtype(), n);
  });
}

}  // namespace distcomm
