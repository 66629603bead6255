// How a reducing op runs: what its backend is asked, and what the host does around it when
// the backend lacks the reduction for the dtype (AVG: a SUM, then a division by the group's
// size; PREMUL_SUM: the inputs scaled, then a SUM). Host tensors only; others are refused.
// AVG of float16 and bfloat16 scales the inputs by 1/size instead (avg_scales_inputs).
#pragma once

#include <cstdint>
#include <string>

#include "api/plugin/backend.h"

namespace distcomm {

struct ReductionPlan {
  ReduceOp run = ReduceOp::SUM;  // what the backend is asked for
  double premultiply_by = 1.0;
  int64_t divide_by = 1;

  // The plan for `requested` on backend b. where_prefix and op name the op in the error
  // ("rank 1/4 group 'world' " "all_reduce"); group_size: AVG's divisor.
  static ReductionPlan make(const std::string& where_prefix, OpType op, Backend& b, ReduceOp requested,
                            const Tensor& t, int group_size);
  // input scaled for the plan (itself when in_place, else a copy), or input as it is.
  Tensor premultiplied(const Tensor& input, bool in_place) const;
  // t scaled for the plan where it is (no Tensor copied: every all_reduce calls this).
  void premultiply_in_place(Tensor& t) const;
  // work, followed by the plan's division of result.
  WorkPtr divided_after(const WorkPtr& work, const Tensor& result) const;
  // The op's options with the reduction the backend is asked for.
  template <typename Options>
  Options applied_to(Options opts) const {
    opts.op = run;
    return opts;
  }
};

}  // namespace distcomm
