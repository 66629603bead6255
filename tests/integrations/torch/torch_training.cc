#include "tests/integrations/torch/torch_training.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>

namespace distcomm {
namespace torch {
namespace test {
namespace {

at::Tensor wave(int step, int micro_batch, int64_t first, int64_t count, int64_t width, double phase) {
  at::Tensor i = at::arange(first * width, (first + count) * width, at::kDouble).reshape({count, width});
  return at::sin(i * 0.37 + phase + step * 1.3 + micro_batch * 0.7).to(at::kFloat);
}

std::vector<at::Tensor> snapshot(::torch::nn::Module& net) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& p : net.parameters()) out.push_back(p.detach().clone());
  return out;
}

void backward_on(Net& net, int step, int micro, int64_t first, int64_t count) {
  at::Tensor out = net.forward(inputs(step, micro, first, count));
  ::torch::nn::functional::mse_loss(out, targets(step, micro, first, count)).backward();
}

}  // namespace

Net::Net(int seed) {
  ::torch::manual_seed(static_cast<uint64_t>(seed));
  fc0 = register_module("fc0", ::torch::nn::Linear(16, 32));
  fc1 = register_module("fc1", ::torch::nn::Linear(32, 32));
  fc2 = register_module("fc2", ::torch::nn::Linear(32, 4));
}

at::Tensor Net::forward(const at::Tensor& x) { return fc2(at::relu(fc1(at::relu(fc0(x))))); }

at::Tensor inputs(int step, int micro_batch, int64_t first, int64_t count) {
  return wave(step, micro_batch, first, count, 16, 0.0);
}

at::Tensor targets(int step, int micro_batch, int64_t first, int64_t count) {
  return wave(step, micro_batch, first, count, 4, 0.5);
}

std::vector<at::Tensor> train_with_ddp(ProcessGroup& pg, const Problem& problem, const DdpOptions& options) {
  at::set_num_threads(1);  // the ranks share the machine's cores
  auto net = std::make_shared<Net>(1 + pg.rank());
  DistributedDataParallel ddp(pg, net, options);
  ::torch::optim::SGD sgd(net->parameters(), ::torch::optim::SGDOptions(problem.learning_rate));
  const int64_t b = problem.batch_per_rank;
  for (int step = 0; step < problem.steps; ++step) {
    sgd.zero_grad();
    for (int micro = 0; micro < problem.micro_batches; ++micro) {
      const bool last = micro + 1 == problem.micro_batches;
      if (last) {
        backward_on(*net, step, micro, pg.rank() * b, b);
        if (!options.finish_in_backward) ddp.finish_backward();
      } else {
        auto guard = ddp.no_sync();
        backward_on(*net, step, micro, pg.rank() * b, b);
        if (!options.finish_in_backward) ddp.finish_backward();
      }
    }
    sgd.step();
  }
  return snapshot(*net);
}

std::vector<at::Tensor> train_single_process(int world, const Problem& problem) {
  at::set_num_threads(1);
  Net net(1);
  ::torch::optim::SGD sgd(net.parameters(), ::torch::optim::SGDOptions(problem.learning_rate));
  for (int step = 0; step < problem.steps; ++step) {
    sgd.zero_grad();
    for (int micro = 0; micro < problem.micro_batches; ++micro) {
      backward_on(net, step, micro, 0, world * problem.batch_per_rank);
    }
    sgd.step();
  }
  return snapshot(net);
}

void expect_same_weights(const std::vector<at::Tensor>& actual, const std::vector<at::Tensor>& reference,
                         double tolerance, const std::string& context) {
  ASSERT_EQ(actual.size(), reference.size()) << context;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double diff = (actual[i] - reference[i]).abs().max().item<double>();
    EXPECT_LE(diff, tolerance) << context << ": parameter " << i << " differs by up to " << diff;
  }
}

}  // namespace test
}  // namespace torch
}  // namespace distcomm
