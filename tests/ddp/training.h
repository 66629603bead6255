// Test helpers: train the example MLP with DDP on N ranks, and the same problem in one
// process on the combined batch, so the tests can compare the two step by step.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "api/process_group.h"
#include "ddp/distributed_data_parallel.h"
#include "examples/nn/sequential.h"

namespace distcomm {
namespace ddp {
namespace test {

// A regression problem, identical on every rank.
struct Problem {
  std::vector<int64_t> widths = {16, 48, 48, 4};
  int64_t batch_per_rank = 4;
  int steps = 3;
  // Backward passes per optimizer step; all but the last run under no_sync().
  int micro_batches = 1;
  float learning_rate = 0.1f;
};

// Gradients after every step's (last) backward pass, and the parameters at the end.
struct Trace {
  std::vector<std::vector<Tensor>> grads;
  std::vector<Tensor> params;
  std::vector<BucketSpec> buckets;  // DDP's buckets at the end (DDP runs only)
};

// The (name, value, grad) list DDP takes, pointing into the model.
std::vector<NamedParameter> ddp_parameters(nn::Sequential& model);

// The model every rank starts from. Seeds differ per rank on purpose: DDP must replace
// them with rank 0's values.
std::unique_ptr<nn::Sequential> make_model(const Problem& problem, int rank);

// Trains on this rank's slice of each global batch with DDP and returns the trace.
Trace train_with_ddp(ProcessGroup& pg, const Problem& problem, const DdpOptions& options);

// One process, one model (rank 0's), on the combined batch of `world` ranks.
Trace train_single_process(int world, const Problem& problem);

// Relative error ||a - b|| / ||b||, at most `tolerance` for every tensor of every step.
void expect_same_trace(const Trace& ddp, const Trace& reference, double tolerance, const std::string& context);

double relative_error(const Tensor& a, const Tensor& b);

}  // namespace test
}  // namespace ddp
}  // namespace distcomm
