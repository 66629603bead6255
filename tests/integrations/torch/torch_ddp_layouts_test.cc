// What an outside user's programs found in distcomm's torch DDP: a parameter no rank used
// keeps no grad with gradient_as_bucket_view too; sparse gradients are refused naming the
// parameter; strided (transposed, channels_last) parameters are trained; a parameter frozen
// on some ranks only is named as such. Real processes over the gloo plugin.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "api/errors.h"
#include "tests/integrations/torch/torch_training.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace torch {
namespace test {
namespace {

class TorchDdpLayouts : public ::testing::TestWithParam<int> {};

// Rank r's gradient of sum(p * c * (r + 1)) is c * (r + 1); the average over `world` ranks
// is c * (world + 1) / 2.
double mean_factor(int world) { return (world + 1) / 2.0; }

// PyTorch 1.13 leaves the grad of a parameter no rank used None, so an optimizer with
// momentum leaves it alone; a defined zero grad would keep moving it.
TEST_P(TorchDdpLayouts, AParameterNoRankUsedKeepsNoGradWithBucketViews) {
  distcomm::testing::run_group(GetParam(), "gloo", [](ProcessGroup& pg) {
    const double r1 = pg.rank() + 1.0;
    auto module = std::make_shared<::torch::nn::Module>();
    at::Tensor a = module->register_parameter("a", at::ones({3}));
    at::Tensor b = module->register_parameter("b", at::ones({3}));
    DdpOptions options;
    options.find_unused_parameters = true;
    options.gradient_as_bucket_view = true;
    DistributedDataParallel ddp(pg, module, options);
    ASSERT_EQ(ddp.buckets().size(), 1u) << "a and b share one bucket";
    for (int step = 0; step < 4; ++step) {
      const std::string context = "rank " + std::to_string(pg.rank()) + ", step " + std::to_string(step);
      for (at::Tensor& p : module->parameters()) p.mutable_grad() = at::Tensor();  // zero_grad(set_to_none)
      const bool use_b = step != 1 && step != 2;
      at::Tensor loss = (a * r1).sum();
      if (use_b) loss = loss + (b * 2 * r1).sum();
      loss.backward();
      ASSERT_TRUE(a.grad().defined()) << context;
      EXPECT_TRUE(at::equal(a.grad(), at::full({3}, mean_factor(pg.size())))) << context;
      if (!use_b) {
        EXPECT_FALSE(b.grad().defined()) << context << ": no rank used b, its grad must stay undefined";
        continue;
      }
      ASSERT_TRUE(b.grad().defined()) << context;
      EXPECT_TRUE(at::equal(b.grad(), at::full({3}, 2 * mean_factor(pg.size())))) << context;
      // Views into one bucket: a's and b's grads are neighbours in its memory.
      const auto* a_data = static_cast<const char*>(a.grad().data_ptr());
      const auto* b_data = static_cast<const char*>(b.grad().data_ptr());
      EXPECT_EQ(std::abs(b_data - a_data), 3 * static_cast<long>(sizeof(float)))
          << context << ": the grads are not views into their bucket";
    }
  });
}

struct WithEmbedding : ::torch::nn::Module {
  explicit WithEmbedding(bool sparse) {
    emb = register_module("emb", ::torch::nn::Embedding(::torch::nn::EmbeddingOptions(10, 3).sparse(sparse)));
    fc = register_module("fc", ::torch::nn::Linear(3, 1));
  }
  ::torch::nn::Embedding emb{nullptr};
  ::torch::nn::Linear fc{nullptr};
};

TEST_P(TorchDdpLayouts, SparseGradientsAreRefusedNamingTheParameter) {
  distcomm::testing::run_group(GetParam(), "gloo", [](ProcessGroup& pg) {
    auto net = std::make_shared<WithEmbedding>(/*sparse=*/true);
    DistributedDataParallel ddp(pg, net);
    const at::Tensor idx = at::tensor({static_cast<int64_t>(pg.rank()), static_cast<int64_t>(pg.rank() + 2)});
    std::string message = "(no error)";
    try {
      net->fc(net->emb(idx)).sum().backward();
    } catch (const InvalidArgument& e) {
      message = e.what();
    } catch (const std::exception& e) {
      message = std::string("not an InvalidArgument: ") + e.what();
    }
    EXPECT_NE(message.find("'emb.weight'"), std::string::npos) << message;
    EXPECT_NE(message.find("sparse"), std::string::npos) << message;
    EXPECT_NE(message.find("sparse(false)"), std::string::npos) << message;
  });
}

// A transposed weight and a channels_last one train like contiguous ones: rank 0's values
// at construction, the exact average of the gradients, in the parameter's own layout.
TEST_P(TorchDdpLayouts, StridedParametersAreTrained) {
  distcomm::testing::run_group(GetParam(), "gloo", [](ProcessGroup& pg) {
    const int world = pg.size();
    const double r1 = pg.rank() + 1.0;
    for (bool bucket_view : {false, true}) {
      for (bool set_to_none : {false, true}) {
        const std::string context = std::string(bucket_view ? "gradient_as_bucket_view" : "copies") +
                                    (set_to_none ? ", grads set to none" : "") + ", rank " + std::to_string(pg.rank());
        auto make = [](int seed) {
          at::manual_seed(seed);
          auto module = std::make_shared<::torch::nn::Module>();
          module->register_parameter("t", at::randn({4, 3}).t());
          module->register_parameter("cl", at::randn({2, 3, 2, 2}).contiguous(at::MemoryFormat::ChannelsLast));
          module->register_parameter("b", at::randn({5}));
          return module;
        };
        auto module = make(1 + pg.rank());
        at::Tensor t = module->named_parameters()["t"];
        at::Tensor cl = module->named_parameters()["cl"];
        at::Tensor b = module->named_parameters()["b"];
        ASSERT_FALSE(t.is_contiguous());
        ASSERT_FALSE(cl.is_contiguous());
        DdpOptions options;
        options.gradient_as_bucket_view = bucket_view;
        DistributedDataParallel ddp(pg, module, options);
        auto rank0 = make(1);
        EXPECT_TRUE(at::equal(t, rank0->named_parameters()["t"])) << context;
        EXPECT_TRUE(at::equal(cl, rank0->named_parameters()["cl"])) << context;
        EXPECT_EQ(t.strides(), rank0->named_parameters()["t"].strides()) << context << ": t kept its layout";
        for (int step = 0; step < 2; ++step) {
          for (at::Tensor& p : module->parameters()) {
            if (set_to_none) {
              p.mutable_grad() = at::Tensor();
            } else if (p.grad().defined()) {
              p.mutable_grad().zero_();
            }
          }
          const at::Tensor ct = at::arange(12, at::kFloat).reshape({3, 4});
          const at::Tensor ccl = at::arange(24, at::kFloat).reshape({2, 3, 2, 2});
          ((t * ct * r1).sum() + (cl * ccl * r1).sum() + (b * r1).sum()).backward();
          const std::string at_step = context + ", step " + std::to_string(step);
          ASSERT_TRUE(t.grad().defined() && cl.grad().defined()) << at_step;
          EXPECT_TRUE(at::allclose(t.grad(), ct * mean_factor(world))) << at_step << "\n" << t.grad();
          EXPECT_TRUE(at::allclose(cl.grad(), ccl * mean_factor(world))) << at_step << "\n" << cl.grad();
          EXPECT_TRUE(at::allclose(b.grad(), at::full({5}, mean_factor(world)))) << at_step;
        }
      }
    }
  });
}

TEST_P(TorchDdpLayouts, AParameterFrozenOnSomeRanksOnlyIsNamed) {
  distcomm::testing::run_group(GetParam(), "gloo", [](ProcessGroup& pg) {
    auto module = std::make_shared<::torch::nn::Module>();
    module->register_parameter("a", at::ones({3}));
    module->register_parameter("b", at::ones({3}));
    module->register_parameter("c", at::ones({2}), /*requires_grad=*/pg.rank() != 0);
    std::string message = "(no error)";
    try {
      DistributedDataParallel ddp(pg, module);
    } catch (const InvalidArgument& e) {
      message = e.what();
    }
    const std::string trainable = pg.size() == 2 ? "rank 1" : "ranks 1, 2";
    EXPECT_NE(message.find("'c' requires grad on " + trainable + ", frozen (requires_grad false) on rank 0"),
              std::string::npos)
        << message;
  });
}

// The number of the group's last host exchange round, from the keys a store exchange leaves
// ("<prefix><call>/<rank>"); -1 where the exchange runs over collectives (no keys).
int64_t last_exchange_round(ProcessGroup& pg) {
  const std::vector<std::string> keys = store_exchange_keys_left(pg.exchange());
  if (keys.empty()) return -1;
  const size_t slash = keys[0].rfind('/');
  const size_t before = keys[0].rfind('/', slash - 1);
  return std::stoll(keys[0].substr(before + 1, slash - before - 1));
}

// requires_grad rides in the frozen parameters' replica round: construction takes two host
// exchange rounds (that one and the core's), not a third of its own for the flags.
TEST_P(TorchDdpLayouts, ConstructionTakesTwoHostExchangeRounds) {
  distcomm::testing::run_group(GetParam(), "gloo", [](ProcessGroup& pg) {
    auto module = std::make_shared<::torch::nn::Module>();
    module->register_parameter("a", at::ones({3}));
    module->register_parameter("frozen", at::ones({2}), /*requires_grad=*/false);
    pg.exchange().all_gather("", "before DDP");
    const int64_t before = last_exchange_round(pg);
    if (before < 0) GTEST_SKIP() << "the host exchange keeps no keys here";
    DistributedDataParallel ddp(pg, module);
    EXPECT_EQ(last_exchange_round(pg) - before, 2);
  });
}

// Construction time with many small parameters, some frozen (printed, not asserted: the
// requires_grad check matched names by search, O(ranks x parameters^2)).
TEST_P(TorchDdpLayouts, ConstructionTimeWithManyParameters) {
  if (GetParam() != 2) GTEST_SKIP() << "timed at 4 ranks only";
  distcomm::testing::run_group(4, "gloo", [](ProcessGroup& pg) {
    auto module = std::make_shared<::torch::nn::Module>();
    for (int i = 0; i < 5000; ++i) {
      module->register_parameter("w" + std::to_string(i), at::ones({4}), /*requires_grad=*/i % 10 != 0);
    }
    pg.exchange().all_gather("", "before DDP");
    const auto start = std::chrono::steady_clock::now();
    DistributedDataParallel ddp(pg, module);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (pg.rank() == 0) {
      std::printf("DDP construction, 5000 parameters (500 frozen), %d ranks: %.1f ms\n", pg.size(), ms);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, TorchDdpLayouts, ::testing::Values(2, 3),
                         [](const ::testing::TestParamInfo<int>& info) { return std::to_string(info.param) + "ranks"; });

}  // namespace
}  // namespace test
}  // namespace torch
}  // namespace distcomm
