// The average over the ranks of a group of one number per rank (a loss, an accuracy, a
// checksum), as the training examples print it. Header-only: one small all_reduce.
#pragma once

#include <distcomm/api/process_group.h>
#include <distcomm/api/tensor.h>

namespace distcomm {
namespace examples {

inline double mean_over_ranks(ProcessGroup& pg, double value) {
  Tensor t = Tensor::of<double>({value});
  AllReduceOptions avg;
  avg.op = ReduceOp::AVG;
  pg.all_reduce(t, avg)->wait();
  return t.item();
}

}  // namespace examples
}  // namespace distcomm
