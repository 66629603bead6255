// Test helpers: a small torch::nn MLP trained with distcomm's torch DDP on N ranks, and the
// same model trained in one process on the combined batch, for the tests to compare.
//
// Forked ranks and libtorch: the ranks are forked from the test's process, so that process
// runs no torch computation before it forks (a thread pool started in the parent does not
// survive a fork); every torch call of these helpers runs in the ranks.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <memory>
#include <string>
#include <vector>

#include "api/process_group.h"
#include "integrations/torch/distributed_data_parallel.h"

namespace distcomm {
namespace torch {
namespace test {

// 16 -> 32 -> 32 -> 4 with ReLU: parameters fc0.weight, fc0.bias, ..., fc2.bias (6).
struct Net : ::torch::nn::Module {
  explicit Net(int seed);
  at::Tensor forward(const at::Tensor& x);
  ::torch::nn::Linear fc0{nullptr}, fc1{nullptr}, fc2{nullptr};
};

struct Problem {
  int steps = 3;
  int64_t batch_per_rank = 4;
  // Backward passes per optimizer step; all but the last run under no_sync().
  int micro_batches = 1;
  double learning_rate = 0.1;
};

// Rows [first, first + count) of the global batch of (step, micro_batch): deterministic
// inputs and regression targets, the same in every process.
at::Tensor inputs(int step, int micro_batch, int64_t first, int64_t count);
at::Tensor targets(int step, int micro_batch, int64_t first, int64_t count);

// Trains Net(seed 1 + rank) with DDP on this rank's rows of every global batch (SGD);
// returns the final parameters. DDP must replace each rank's initial weights with rank 0's.
std::vector<at::Tensor> train_with_ddp(ProcessGroup& pg, const Problem& problem, const DdpOptions& options);

// Net(seed 1) in one process on the combined batch of `world` ranks.
std::vector<at::Tensor> train_single_process(int world, const Problem& problem);

// Every parameter within `tolerance` (absolute, per element) of the reference.
void expect_same_weights(const std::vector<at::Tensor>& actual, const std::vector<at::Tensor>& reference,
                         double tolerance, const std::string& context);

}  // namespace test
}  // namespace torch
}  // namespace distcomm
