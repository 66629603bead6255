// Parameters that get no gradient on some ranks (a layer one rank skips): with
// find_unused_parameters they contribute zero and the result is the average of what each
// rank computed; parameters no rank used keep their gradient untouched. Without it, every
// rank gets an error naming the parameters -- not a hang -- and the next iteration works.
// Both hold with a comm hook that sparsifies (the usage flags never go through the hook).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>

#include "api/errors.h"
#include "examples/nn/loss.h"
#include "examples/nn/sgd.h"
#include "examples/nn/synthetic_data.h"
#include "tests/ddp/training.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace ddp {
namespace test {
namespace {

constexpr double kTolerance = 1e-5;
constexpr size_t kSkippableLayer = 4;  // fc2 in fc0, relu, fc1, relu, fc2, relu, fc3
constexpr size_t kSkippableWeight = 4, kSkippableBias = 5;

Problem skippable_problem() {
  Problem p;
  p.widths = {16, 48, 48, 48, 4};
  return p;
}

nn::Dataset data_for(const Problem& p, int world) {
  return nn::make_regression(p.steps * world * p.batch_per_rank, p.widths.front(), p.widths.back(), 7);
}

int64_t slice_begin(const Problem& p, int world, int step, int rank) {
  return (static_cast<int64_t>(step) * world + rank) * p.batch_per_rank;
}

void forward_backward(nn::Sequential& model, const nn::Dataset& data, int64_t begin, int64_t count,
                      const nn::GradReadyHook& hook = {}) {
  Tensor out = model.forward(nn::rows(data.inputs, begin, count));
  model.backward(nn::mse_loss(out, nn::rows(data.targets, begin, count)).grad, hook);
}

// What DDP must produce when ranks run different models: each rank's own gradient on its
// own slice, averaged over the ranks (zeros where a rank skipped the layer). Computed in
// this process alone, on `model` (whose parameters equal rank 0's).
std::vector<Tensor> averaged_local_gradients(nn::Sequential& model, const Problem& p, const nn::Dataset& data,
                                             int world, int step, const std::function<bool(int)>& uses_layer) {
  std::vector<Tensor> sum;
  for (nn::Parameter* param : model.parameters()) sum.push_back(Tensor::zeros(param->grad.shape()));
  for (int r = 0; r < world; ++r) {
    model.zero_grad();
    model.set_enabled(kSkippableLayer, uses_layer(r));
    forward_backward(model, data, slice_begin(p, world, step, r), p.batch_per_rank);
    const auto params = model.parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      for (int64_t k = 0; k < sum[i].numel(); ++k) sum[i].set_item(k, sum[i].item(k) + params[i]->grad.item(k) / world);
    }
  }
  model.set_enabled(kSkippableLayer, true);
  return sum;
}

class DdpUnusedParameters : public ::testing::TestWithParam<int> {};

TEST_P(DdpUnusedParameters, ALayerOneRankSkipsIsAveragedWithZeros) {
  distcomm::testing::run_group(GetParam(), "gloo", [](ProcessGroup& pg) {
    const Problem p = skippable_problem();
    const nn::Dataset data = data_for(p, pg.size());
    auto uses_layer = [](int rank) { return rank != 1; };
    for (double cap : {0.0, 1000.0}) {
      for (bool view : {false, true}) {
        const std::string context = "bucket_cap_mb=" + std::to_string(static_cast<int>(cap)) + (view ? ", bucket view" : "");
        auto model = make_model(p, pg.rank());
        auto reference = make_model(p, 0);
        DdpOptions options;
        options.find_unused_parameters = true;
        options.bucket_cap_mb = cap;
        options.gradient_as_bucket_view = view;
        DistributedDataParallel ddp(pg, ddp_parameters(*model), options);
        model->set_enabled(kSkippableLayer, uses_layer(pg.rank()));
        nn::Sgd sgd(model->parameters(), p.learning_rate), reference_sgd(reference->parameters(), p.learning_rate);
        for (int step = 0; step < p.steps; ++step) {
          sgd.zero_grad();
          forward_backward(*model, data, slice_begin(p, pg.size(), step, pg.rank()), p.batch_per_rank,
                           [&](size_t i) { ddp.mark_grad_ready(i); });
          ddp.finish_backward();
          const auto expected = averaged_local_gradients(*reference, p, data, pg.size(), step, uses_layer);
          const auto params = model->parameters(), reference_params = reference->parameters();
          for (size_t i = 0; i < params.size(); ++i) {
            EXPECT_LE(relative_error(params[i]->grad, expected[i]), kTolerance)
                << context << ": " << params[i]->name << " step " << step;
            reference_params[i]->grad.copy_from(expected[i]);
          }
          sgd.step();
          reference_sgd.step();
        }
      }
    }
  });
}

TEST_P(DdpUnusedParameters, AParameterNoRankUsesKeepsItsGradient) {
  distcomm::testing::run_group(GetParam(), "gloo", [](ProcessGroup& pg) {
    const Problem p = skippable_problem();
    const nn::Dataset data = data_for(p, pg.size());
    for (bool view : {false, true}) {
      auto model = make_model(p, pg.rank());
      auto reference = make_model(p, 0);
      DdpOptions options;
      options.find_unused_parameters = true;
      options.bucket_cap_mb = 0.001;
      options.gradient_as_bucket_view = view;
      DistributedDataParallel ddp(pg, ddp_parameters(*model), options);
      model->set_enabled(kSkippableLayer, false);
      model->zero_grad();
      const auto params = model->parameters();
      params[kSkippableWeight]->grad.fill(0.5);  // left over from earlier: DDP must not touch it
      forward_backward(*model, data, slice_begin(p, pg.size(), 0, pg.rank()), p.batch_per_rank,
                       [&](size_t i) { ddp.mark_grad_ready(i); });
      ddp.finish_backward();
      for (int64_t k = 0; k < params[kSkippableWeight]->grad.numel(); ++k) {
        ASSERT_EQ(params[kSkippableWeight]->grad.item(k), 0.5) << (view ? "bucket view" : "copy");
      }
      const auto expected = averaged_local_gradients(*reference, p, data, pg.size(), 0, [](int) { return false; });
      for (size_t i = 0; i < params.size(); ++i) {
        if (i == kSkippableWeight || i == kSkippableBias) continue;
        EXPECT_LE(relative_error(params[i]->grad, expected[i]), kTolerance) << params[i]->name;
      }
    }
  });
}

TEST_P(DdpUnusedParameters, WithoutFindUnusedEveryRankGetsAnErrorNamingTheParameter) {
  distcomm::testing::run_group(GetParam(), "gloo", [](ProcessGroup& pg) {
    const Problem p = skippable_problem();
    const nn::Dataset data = data_for(p, pg.size());
    auto model = make_model(p, pg.rank());
    auto reference = make_model(p, 0);
    DdpOptions options;
    options.bucket_cap_mb = 0.001;  // several buckets: some launch during backward, some not
    DistributedDataParallel ddp(pg, ddp_parameters(*model), options);
    auto mark = [&](size_t i) { ddp.mark_grad_ready(i); };
    for (int attempt = 0; attempt < 2; ++attempt) {
      model->zero_grad();
      model->set_enabled(kSkippableLayer, pg.rank() != 1);
      forward_backward(*model, data, slice_begin(p, pg.size(), 0, pg.rank()), p.batch_per_rank, mark);
      try {
        ddp.finish_backward();
        ADD_FAILURE() << "rank " << pg.rank() << ": finish_backward did not throw";
      } catch (const Error& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("'fc2.weight' (parameter 4) on rank 1"), std::string::npos) << m;
        EXPECT_NE(m.find("'fc2.bias' (parameter 5) on rank 1"), std::string::npos) << m;
        EXPECT_NE(m.find("find_unused_parameters = true"), std::string::npos) << m;
      }
    }
    // The group and DDP are still in step: a normal iteration works and is right.
    model->set_enabled(kSkippableLayer, true);
    model->zero_grad();
    forward_backward(*model, data, slice_begin(p, pg.size(), 0, pg.rank()), p.batch_per_rank, mark);
    ddp.finish_backward();
    const auto expected = averaged_local_gradients(*reference, p, data, pg.size(), 0, [](int) { return true; });
    const auto params = model->parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      EXPECT_LE(relative_error(params[i]->grad, expected[i]), kTolerance) << params[i]->name;
    }
  });
}

// A parameter used in a no_sync() pass but not in the synchronised one still counts as
// used: its accumulated gradient is reduced.
TEST_P(DdpUnusedParameters, UseUnderNoSyncCounts) {
  distcomm::testing::run_group(GetParam(), "gloo", [](ProcessGroup& pg) {
    const Problem p = skippable_problem();
    const nn::Dataset data = data_for(p, pg.size());
    auto model = make_model(p, pg.rank());
    auto reference = make_model(p, 0);
    DdpOptions options;
    options.find_unused_parameters = true;
    DistributedDataParallel ddp(pg, ddp_parameters(*model), options);
    auto mark = [&](size_t i) { ddp.mark_grad_ready(i); };
    model->zero_grad();
    {
      auto guard = ddp.no_sync();
      forward_backward(*model, data, slice_begin(p, pg.size(), 0, pg.rank()), p.batch_per_rank, mark);
      ddp.finish_backward();
    }
    model->set_enabled(kSkippableLayer, false);  // on every rank, in the synchronised pass
    forward_backward(*model, data, slice_begin(p, pg.size(), 1, pg.rank()), p.batch_per_rank, mark);
    ddp.finish_backward();
    const auto first = averaged_local_gradients(*reference, p, data, pg.size(), 0, [](int) { return true; });
    const auto second = averaged_local_gradients(*reference, p, data, pg.size(), 1, [](int) { return false; });
    const auto params = model->parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      Tensor expected = first[i].clone();
      for (int64_t k = 0; k < expected.numel(); ++k) expected.set_item(k, expected.item(k) + second[i].item(k));
      EXPECT_LE(relative_error(params[i]->grad, expected), kTolerance) << params[i]->name;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, DdpUnusedParameters, ::testing::Values(2, 3),
                         [](const ::testing::TestParamInfo<int>& info) { return std::to_string(info.param) + "ranks"; });

// A comm hook of the user's that sparsifies, as a top-k hook does: it drops every element
// under `threshold` (the small ones), then averages what is left.
CommHook sparsifying_hook(double threshold) {
  return [threshold](ProcessGroup& pg, GradBucket& bucket) {
    for (int64_t k = 0; k < bucket.buffer.numel(); ++k) {
      if (std::abs(bucket.buffer.item(k)) < threshold) bucket.buffer.set_item(k, 0.0);
    }
    AllReduceOptions avg;
    avg.op = ReduceOp::AVG;
    return pg.all_reduce(bucket.buffer, avg);
  };
}

// Which ranks produced which gradients must not go through such a hook. It used to ride as
// 1.0 flags at the end of the last bucket, which the hook dropped next to gradients of 6 and
// more: DDP concluded that no rank used any parameter, left every gradient local, exit code
// 0, and the ranks trained different models. Gradients are multiples of 6, so the averages
// are exact at 2 and 3 ranks.
class DdpUsageWithSparsifyingHook : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

struct ThreeParameters {
  // a: every rank produces its gradient; b: rank 0 only; c: no rank.
  Tensor a = Tensor::zeros({4}), a_grad = Tensor::zeros({4});
  Tensor b = Tensor::zeros({3}), b_grad = Tensor::zeros({3});
  Tensor c = Tensor::zeros({2}), c_grad = Tensor::zeros({2});
  std::vector<NamedParameter> named() { return {{"a", &a, &a_grad}, {"b", &b, &b_grad}, {"c", &c, &c_grad}}; }
  void backward(DistributedDataParallel& ddp, int rank) {
    for (int64_t k = 0; k < a_grad.numel(); ++k) a_grad.set_item(k, 6.0 * (rank + 1) * (k + 1));
    for (int64_t k = 0; k < b_grad.numel(); ++k) b_grad.set_item(k, rank == 0 ? -6.0 * (k + 1) : 0.25);
    c_grad.fill(0.5);
    ddp.mark_grad_ready(0);
    if (rank == 0) ddp.mark_grad_ready(1);
  }
};

TEST_P(DdpUsageWithSparsifyingHook, FindUnusedParametersAveragesWhatSomeRankUsed) {
  const auto& [backend, world] = GetParam();
  distcomm::testing::run_group(world, backend, [](ProcessGroup& pg) {
    const int rank = pg.rank(), world = pg.size();
    for (double cap : {0.0, 1000.0}) {
      for (bool view : {false, true}) {
        const std::string context = "bucket_cap_mb=" + std::to_string(static_cast<int>(cap)) + (view ? ", bucket view" : "");
        ThreeParameters m;
        DdpOptions options;
        options.find_unused_parameters = true;
        options.bucket_cap_mb = cap;
        options.gradient_as_bucket_view = view;
        options.comm_hook = sparsifying_hook(2.0);
        DistributedDataParallel ddp(pg, m.named(), options);
        for (int step = 0; step < 2; ++step) {  // the second after the buckets are rebuilt
          m.backward(ddp, rank);
          ddp.finish_backward();
          for (int64_t k = 0; k < m.a_grad.numel(); ++k) {
            EXPECT_FLOAT_EQ(m.a_grad.item(k), 6.0 * (k + 1) * (world + 1) / 2) << context << ", a[" << k << "] step " << step;
          }
          for (int64_t k = 0; k < m.b_grad.numel(); ++k) {  // rank 0's, averaged with zeros
            EXPECT_FLOAT_EQ(m.b_grad.item(k), -6.0 * (k + 1) / world) << context << ", b[" << k << "] step " << step;
          }
          EXPECT_EQ(m.c_grad.to_doubles(), std::vector<double>(2, 0.5)) << context << ": no rank used c";
          EXPECT_EQ(ddp.last_stats().unused_parameters, std::vector<size_t>{2}) << context << " step " << step;
        }
      }
    }
  });
}

TEST_P(DdpUsageWithSparsifyingHook, WithoutFindUnusedAMissedGradientIsStillAnErrorOnEveryRank) {
  const auto& [backend, world] = GetParam();
  distcomm::testing::run_group(world, backend, [](ProcessGroup& pg) {
    const int rank = pg.rank(), world = pg.size();
    ThreeParameters m;
    DdpOptions options;
    options.comm_hook = sparsifying_hook(2.0);
    DistributedDataParallel ddp(pg, m.named(), options);
    m.backward(ddp, rank);  // b on rank 0 only, c nowhere
    try {
      ddp.finish_backward();
      ADD_FAILURE() << "rank " << rank << ": finish_backward did not throw";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("'b' (parameter 1) on " + std::string(world == 2 ? "rank 1" : "ranks 1, 2")),
                std::string::npos) << message;
      EXPECT_NE(message.find("'c' (parameter 2) on"), std::string::npos) << message;
    }
    // Still in step: a pass that marks everything is averaged.
    m.backward(ddp, rank);
    if (rank != 0) ddp.mark_grad_ready(1);
    ddp.mark_grad_ready(2);
    ddp.finish_backward();
    EXPECT_FLOAT_EQ(m.a_grad.item(3), 24.0 * (world + 1) / 2);
  });
}

INSTANTIATE_TEST_SUITE_P(BackendsAndRanks, DdpUsageWithSparsifyingHook,
                         ::testing::Combine(::testing::Values("gloo", "shm"), ::testing::Values(2, 3)),
                         [](const ::testing::TestParamInfo<std::tuple<std::string, int>>& info) {
                           return std::get<0>(info.param) + "_" + std::to_string(std::get<1>(info.param)) + "ranks";
                         });

}  // namespace
}  // namespace test
}  // namespace ddp
}  // namespace distcomm
