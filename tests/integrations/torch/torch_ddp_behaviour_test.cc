// What distcomm's torch DDP does besides averaging: it broadcasts rank 0's parameters and
// buffers at construction, starts buckets during backward (autograd's hooks), names a
// parameter that got no gradient, handles parameters unused on some ranks, and lets go of
// autograd when destroyed. Real processes over the gloo plugin.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/nn/functional/loss.h>

#include <chrono>

#include "api/errors.h"
#include "ddp/comm_hooks.h"
#include "tests/testing/multiprocess.h"
#include "tests/integrations/torch/torch_training.h"

namespace distcomm {
namespace torch {
namespace test {
namespace {

// Net plus a buffer and two extra layers: `sometimes` joins the loss where the caller
// says, `never` never does.
struct NetWithExtras : Net {
  explicit NetWithExtras(int seed) : Net(seed) {
    steps_seen = register_buffer("steps_seen", at::full({2}, static_cast<float>(seed)));
    sometimes = register_module("sometimes", ::torch::nn::Linear(16, 4));
    never = register_module("never", ::torch::nn::Linear(16, 4));
  }
  at::Tensor forward_with(const at::Tensor& x, bool use_sometimes) {
    at::Tensor out = forward(x);
    return use_sometimes ? out + sometimes(x) : out;
  }
  at::Tensor steps_seen;
  ::torch::nn::Linear sometimes{nullptr}, never{nullptr};
};

at::Tensor loss_of(NetWithExtras& net, int rank, bool use_sometimes) {
  return ::torch::nn::functional::mse_loss(net.forward_with(inputs(0, 0, rank * 4, 4), use_sometimes),
                                           targets(0, 0, rank * 4, 4));
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

class TorchDdp : public ::testing::TestWithParam<int> {};

TEST_P(TorchDdp, ConstructionCopiesRankZerosParametersAndBuffers) {
  distcomm::testing::run_group(GetParam(), "gloo", [](ProcessGroup& pg) {
    auto net = std::make_shared<NetWithExtras>(1 + pg.rank());
    DistributedDataParallel ddp(pg, net);
    const NetWithExtras rank0(1);
    EXPECT_TRUE(at::equal(net->fc1->weight, rank0.fc1->weight));
    EXPECT_TRUE(at::equal(net->never->bias, rank0.never->bias));
    EXPECT_TRUE(at::equal(net->steps_seen, at::full({2}, 1.0f)));
    const std::vector<std::string> names = ddp.parameter_names();
    ASSERT_EQ(names.size(), 10u);
    EXPECT_EQ(names[0], "fc0.weight");
    EXPECT_EQ(names[9], "never.bias");
  });
}

TEST_P(TorchDdp, BucketsAreReducedWhileBackwardIsStillRunning) {
  distcomm::testing::run_group(GetParam(), "gloo", [](ProcessGroup& pg) {
    auto net = std::make_shared<Net>(1);
    WorkPtr first_bucket;
    DdpOptions options;
    options.bucket_cap_mb = 0;  // a bucket per parameter, the last layer's first
    options.comm_hook = [&first_bucket](ProcessGroup& group, ddp::GradBucket& bucket) {
      WorkPtr work = ddp::allreduce_hook()(group, bucket);
      if (bucket.index == 0) first_bucket = work;
      return work;
    };
    DistributedDataParallel ddp(pg, net, options);
    // fc0.weight's gradient is the last autograd computes; when it arrives, the last
    // layer's buckets have been launched, and the first one ends while backward waits here.
    size_t launched_before_last = 0;
    net->fc0->weight.register_hook([&](const at::Tensor& grad) {
      launched_before_last = ddp.buckets_launched();
      if (first_bucket) first_bucket->wait(std::chrono::seconds(30));
      return grad;
    });
    ::torch::nn::functional::mse_loss(net->forward(inputs(0, 0, pg.rank() * 4, 4)), targets(0, 0, pg.rank() * 4, 4))
        .backward();
    EXPECT_GE(launched_before_last, 1u);
    ASSERT_TRUE(first_bucket);
    EXPECT_TRUE(first_bucket->is_completed());
    const ddp::IterationStats& stats = ddp.last_stats();  // backward ended the pass itself
    EXPECT_EQ(stats.iteration, 1u);
    EXPECT_EQ(stats.buckets_started_in_backward, 6u) << stats.summary();
    EXPECT_GT(stats.overlapped_ms, 0.0) << stats.summary();
  });
}

TEST_P(TorchDdp, AParameterWithoutAGradientIsNamed) {
  distcomm::testing::run_group(GetParam(), "gloo", [](ProcessGroup& pg) {
    for (bool implicit : {true, false}) {
      auto net = std::make_shared<NetWithExtras>(1);
      DdpOptions options;
      options.finish_in_backward = implicit;
      DistributedDataParallel ddp(pg, net, options);
      // Rank 1 leaves `sometimes` out; no rank uses `never`.
      std::string message = error_of([&] {
        loss_of(*net, pg.rank(), pg.rank() != 1).backward();
        if (!implicit) ddp.finish_backward();
      });
      EXPECT_NE(message.find("'never.weight' (parameter 8) on ranks 0, 1"), std::string::npos) << message;
      EXPECT_NE(message.find("'sometimes.weight' (parameter 6) on rank 1"), std::string::npos) << message;
      EXPECT_NE(message.find("find_unused_parameters = true"), std::string::npos) << message;
      if (pg.rank() == 1) {
        EXPECT_FALSE(net->sometimes->weight.grad().defined()) << "the zero grad made for the exchange stayed";
      }
    }
  });
}

TEST_P(TorchDdp, FindUnusedParametersAveragesWhatSomeRanksUsed) {
  distcomm::testing::run_group(GetParam(), "gloo", [](ProcessGroup& pg) {
    const int world = pg.size();
    auto net = std::make_shared<NetWithExtras>(1);
    DdpOptions options;
    options.find_unused_parameters = true;
    DistributedDataParallel ddp(pg, net, options);
    loss_of(*net, pg.rank(), pg.rank() == 0).backward();  // only rank 0 uses `sometimes`
    // Rank 0's gradient of `sometimes`, computed alone, divided by the world size.
    NetWithExtras alone(1);
    loss_of(alone, 0, true).backward();
    const at::Tensor expected = alone.sometimes->weight.grad() / world;
    ASSERT_TRUE(net->sometimes->weight.grad().defined());
    EXPECT_LE((net->sometimes->weight.grad() - expected).abs().max().item<double>(), 1e-7);
    EXPECT_FALSE(net->never->weight.grad().defined()) << "no rank used it: it keeps no gradient";
    EXPECT_EQ(ddp.last_stats().unused_parameters, (std::vector<size_t>{8, 9}));
  });
}

// Uneven inputs: rank r runs 1 + r steps inside join(); every step averages over the whole
// world (a rank that has joined adds zeros), and every rank ends with one model, that of
// the same training in one process.
TEST_P(TorchDdp, JoinTrainsRanksWithUnevenStepsIntoOneModel) {
  distcomm::testing::run_group(GetParam(), "gloo", [](ProcessGroup& pg) {
    const int world = pg.size(), mine = 1 + pg.rank(), longest = world;
    constexpr double kLr = 0.1;
    auto loss = [](Net& m, int rank, int step) {
      return ::torch::nn::functional::mse_loss(m.forward(inputs(step, 0, rank * 4, 4)), targets(step, 0, rank * 4, 4));
    };
    auto net = std::make_shared<Net>(1 + pg.rank());
    DistributedDataParallel ddp(pg, net);
    const size_t shadowed = ddp.join([&] {
      for (int k = 0; k < mine; ++k) {
        net->zero_grad();
        loss(*net, pg.rank(), k).backward();
        ::torch::NoGradGuard no_grad;
        for (at::Tensor& p : net->parameters()) p.sub_(kLr * p.grad());
      }
    });
    EXPECT_EQ(shadowed, static_cast<size_t>(longest - mine));
    Net alone(1);
    for (int k = 0; k < longest; ++k) {
      std::vector<at::Tensor> sum;
      for (const at::Tensor& p : alone.parameters()) sum.push_back(at::zeros_like(p));
      for (int r = 0; r < world; ++r) {
        if (1 + r <= k) continue;  // rank r has joined: it adds zeros
        alone.zero_grad();
        loss(alone, r, k).backward();
        const auto params = alone.parameters();
        for (size_t i = 0; i < params.size(); ++i) sum[i] += params[i].grad();
      }
      ::torch::NoGradGuard no_grad;
      auto params = alone.parameters();
      for (size_t i = 0; i < params.size(); ++i) params[i].sub_(kLr * sum[i] / world);
    }
    expect_same_weights(net->parameters(), alone.parameters(), 1e-6, "rank " + std::to_string(pg.rank()));
  });
}

TEST(TorchDdpLifetime, DestroyedDdpLeavesAutogradAlone) {
  distcomm::testing::run_group(2, "gloo", [](ProcessGroup& pg) {
    auto net = std::make_shared<Net>(1 + pg.rank());
    { DistributedDataParallel ddp(pg, net); }
    // Only rank 1 runs backward: a hook left behind would start a collective nobody joins.
    if (pg.rank() == 1) {
      ::torch::nn::functional::mse_loss(net->forward(inputs(0, 0, 0, 4)), targets(0, 0, 0, 4)).backward();
      EXPECT_TRUE(net->fc0->weight.grad().defined());
    }
    pg.barrier()->wait();
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, TorchDdp, ::testing::Values(2, 3),
                         [](const ::testing::TestParamInfo<int>& info) { return std::to_string(info.param) + "ranks"; });

}  // namespace
}  // namespace test
}  // namespace torch
}  // namespace distcomm
