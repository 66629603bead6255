// The module's state as DDP sees it after construction: parameters whose storage is
// replaced after DDP was built (torch::load into the module, tensor.set_ under NoGradGuard:
// autograd then gives the parameter a new gradient accumulator) keep being averaged, and
// the buffers re-broadcast are the module's new ones; parameters that do not require grad
// (frozen) are checked across ranks and broadcast from rank 0 at construction, as PyTorch's
// DDP does. Real processes over the gloo plugin.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/nn/functional/loss.h>
#include <torch/serialize.h>

#include <algorithm>
#include <sstream>

#include "api/errors.h"
#include "tests/integrations/torch/torch_training.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace torch {
namespace test {
namespace {

struct NetWithBuffer : Net {
  explicit NetWithBuffer(int seed) : Net(seed) { steps = register_buffer("steps", at::full({2}, 0.0f)); }
  at::Tensor steps;
};

at::Tensor loss_of(Net& net, int rank, int step) {
  return ::torch::nn::functional::mse_loss(net.forward(inputs(step, 0, rank * 4, 4)), targets(step, 0, rank * 4, 4));
}

// The gradients of Net(1) on the combined batch of `world` ranks at `step`: what DDP's
// average must be on every rank.
std::vector<at::Tensor> averaged_gradients(int world, int step) {
  Net alone(1);
  std::vector<at::Tensor> sum;
  for (const at::Tensor& p : alone.parameters()) sum.push_back(at::zeros_like(p));
  for (int r = 0; r < world; ++r) {
    alone.zero_grad();
    loss_of(alone, r, step).backward();
    const auto params = alone.parameters();
    for (size_t i = 0; i < params.size(); ++i) sum[i] += params[i].grad();
  }
  for (at::Tensor& s : sum) s /= world;
  return sum;
}

std::vector<at::Tensor> gradients(Net& net) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& p : net.parameters()) {
    EXPECT_TRUE(p.grad().defined());
    out.push_back(p.grad().defined() ? p.grad().clone() : at::zeros_like(p));
  }
  return out;
}

class TorchDdpState : public ::testing::TestWithParam<int> {};

// PyTorch users build, wrap, then resume from a checkpoint: torch::load set_()s every
// parameter and buffer to the file's tensors (new storage), after DDP hooked autograd.
TEST_P(TorchDdpState, ReplacingParameterStorageAfterWrappingKeepsAveraging) {
  distcomm::testing::run_group(GetParam(), "gloo", [](ProcessGroup& pg) {
    const int world = pg.size(), rank = pg.rank();
    for (const std::string how : {"torch::load", "set_"}) {
      for (bool bucket_view : {false, true}) {
        const std::string context = how + (bucket_view ? " (gradient_as_bucket_view)" : "") + ", rank " +
                                    std::to_string(rank);
        auto net = std::make_shared<NetWithBuffer>(1);
        DdpOptions options;
        options.gradient_as_bucket_view = bucket_view;
        DistributedDataParallel ddp(pg, net, options);
        const void* before = net->fc1->weight.data_ptr();
        const void* buffer_before = net->steps.data_ptr();
        if (how == "torch::load") {
          // Every rank's checkpoint has Net(1)'s parameters and a buffer of its own.
          auto saved = std::make_shared<NetWithBuffer>(1);
          saved->steps.fill_(10.0f + rank);
          std::stringstream file;
          ::torch::save(std::static_pointer_cast<::torch::nn::Module>(saved), file);
          ::torch::load(net, file);
        } else {
          ::torch::NoGradGuard no_grad;
          net->fc1->weight.set_(net->fc1->weight.clone());
          net->fc2->bias.set_(net->fc2->bias.clone());
          net->steps.set_(at::full({2}, 10.0f + rank));
        }
        ASSERT_NE(net->fc1->weight.data_ptr(), before) << context << ": the storage was not replaced";
        ASSERT_NE(net->steps.data_ptr(), buffer_before) << context << ": the buffer's storage was not replaced";
        for (int step = 0; step < 2; ++step) {
          net->zero_grad();
          loss_of(*net, rank, step).backward();
          expect_same_weights(gradients(*net), averaged_gradients(world, step), 1e-6,
                              context + ", step " + std::to_string(step));
          // The module's buffer (the new storage) holds rank 0's value after the pass.
          EXPECT_TRUE(at::equal(net->steps, at::full({2}, 10.0f))) << context << ": " << net->steps;
        }
        EXPECT_EQ(ddp.last_stats().iteration, 2u) << context;
      }
    }
  });
}

// Frozen parameters (requires_grad false) are not reduced, but PyTorch's DDP broadcasts
// them from rank 0 with the rest of the module's state.
TEST_P(TorchDdpState, FrozenParametersAreBroadcastFromRankZero) {
  distcomm::testing::run_group(GetParam(), "gloo", [](ProcessGroup& pg) {
    auto net = std::make_shared<Net>(1 + pg.rank());
    net->fc1->weight.set_requires_grad(false);
    DistributedDataParallel ddp(pg, net);
    const Net rank0(1);
    EXPECT_TRUE(at::equal(net->fc1->weight, rank0.fc1->weight)) << "rank " << pg.rank();
    EXPECT_TRUE(at::equal(net->fc0->weight, rank0.fc0->weight)) << "rank " << pg.rank();
    const std::vector<std::string> names = ddp.parameter_names();
    EXPECT_EQ(names.size(), 5u);
    EXPECT_EQ(std::count(names.begin(), names.end(), "fc1.weight"), 0) << "a frozen parameter is not reduced";
    loss_of(*net, pg.rank(), 0).backward();
    EXPECT_FALSE(net->fc1->weight.grad().defined());
    EXPECT_EQ(ddp.last_stats().iteration, 1u);
  });
}

TEST_P(TorchDdpState, AFrozenParameterOfAnotherShapeIsNamedOnEveryRank) {
  distcomm::testing::run_group(GetParam(), "gloo", [](ProcessGroup& pg) {
    auto module = std::make_shared<::torch::nn::Module>();
    module->register_parameter("w", at::ones({2}), /*requires_grad=*/true);
    module->register_parameter("frozen_scale", at::ones({pg.rank() == 1 ? 3 : 2}), /*requires_grad=*/false);
    std::string message = "(no error)";
    try {
      DistributedDataParallel ddp(pg, module);
    } catch (const InvalidArgument& e) {
      message = e.what();
    }
    EXPECT_NE(message.find("'frozen_scale'"), std::string::npos) << message;
    EXPECT_NE(message.find("[3]"), std::string::npos) << message;
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, TorchDdpState, ::testing::Values(2, 3),
                         [](const ::testing::TestParamInfo<int>& info) { return std::to_string(info.param) + "ranks"; });

}  // namespace
}  // namespace test
}  // namespace torch
}  // namespace distcomm
