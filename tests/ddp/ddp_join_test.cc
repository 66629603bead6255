// Uneven inputs (DistributedDataParallel::join, PyTorch's `with model.join():`): ranks run
// different numbers of backward passes; a rank whose loop has ended runs the others'
// remaining passes with zero gradients, so every pass averages over the whole world, and
// at the end every rank holds the model of the rank that trained longest. Checked exactly
// against the same training computed in one process, over gloo and shm, at 2 and 3 ranks,
// with one bucket and with one per parameter (bucket views), find_unused_parameters, a
// comm hook of the user's, buffers, and a rank with no passes at all.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "api/errors.h"
#include "ddp/distributed_data_parallel.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace ddp {
namespace {

constexpr double kLr = 0.125;
constexpr double kTolerance = 1e-4;
const std::vector<int64_t> kSizes = {5, 3};  // two parameters

// The gradient rank r produces for element e of parameter i in its pass k.
double grad_value(int r, int k, size_t i, int64_t e) { return (r + 1) * (k + 1) + 0.5 * static_cast<double>(e) + i; }

// Whether rank r produces a gradient for parameter i in pass k (with find_unused, rank 1
// skips parameter 1 in its even passes).
bool produces(bool find_unused, int r, int k, size_t i) { return !(find_unused && r == 1 && i == 1 && k % 2 == 0); }

struct Setting {
  std::string name;
  std::function<int(int rank)> passes;
  bool find_unused = false;
  bool one_bucket_each = false;  // bucket_cap_mb = 0, gradient_as_bucket_view
  bool user_hook = false;
  // join(divide_by_initial_world_size=false): each pass averages over the ranks training.
  bool divide_by_training = false;
};

// The averaged gradient of pass k and the parameters after `steps` passes, in one process.
std::vector<std::vector<double>> averaged(const Setting& s, int world, int k) {
  int training = 0;
  for (int r = 0; r < world; ++r) training += s.passes(r) > k ? 1 : 0;
  // A rank that produced no gradient still counts (it adds zeros), as in PyTorch.
  const int divisor = s.divide_by_training ? training : world;
  std::vector<std::vector<double>> g;
  for (size_t i = 0; i < kSizes.size(); ++i) {
    g.emplace_back(static_cast<size_t>(kSizes[i]), 0.0);
    for (int r = 0; r < world; ++r) {
      if (s.passes(r) <= k || !produces(s.find_unused, r, k, i)) continue;
      for (int64_t e = 0; e < kSizes[i]; ++e) g[i][static_cast<size_t>(e)] += grad_value(r, k, i, e) / divisor;
    }
  }
  return g;
}

std::vector<std::vector<double>> trained(const Setting& s, int world) {
  int longest = 0;
  for (int r = 0; r < world; ++r) longest = std::max(longest, s.passes(r));
  std::vector<std::vector<double>> w;
  for (int64_t n : kSizes) w.emplace_back(static_cast<size_t>(n), 1.0);
  for (int k = 0; k < longest; ++k) {
    const auto g = averaged(s, world, k);
    for (size_t i = 0; i < w.size(); ++i) {
      for (size_t e = 0; e < w[i].size(); ++e) w[i][e] -= kLr * g[i][e];
    }
  }
  return w;
}

void train_with_join(ProcessGroup& pg, const Setting& s) {
  const int me = pg.rank(), world = pg.size();
  std::vector<Tensor> values, grads;
  for (int64_t n : kSizes) {
    values.push_back(Tensor::zeros({n}));
    values.back().fill(me == 0 ? 1.0 : 7.0);  // DDP's construction copies rank 0's
    grads.push_back(Tensor::zeros({n}));
  }
  Tensor buffer = Tensor::zeros({2});
  std::vector<NamedParameter> params;
  for (size_t i = 0; i < kSizes.size(); ++i) params.push_back({"p" + std::to_string(i), &values[i], &grads[i]});
  DdpOptions options;
  options.find_unused_parameters = s.find_unused;
  if (s.one_bucket_each) {
    options.bucket_cap_mb = 0;
    options.gradient_as_bucket_view = true;
  }
  if (s.user_hook) {
    // Not a built-in hook: the usage flags go in DDP's own all_gather.
    options.comm_hook = [plain = allreduce_hook()](ProcessGroup& g, GradBucket& b) { return plain(g, b); };
  }
  DistributedDataParallel ddp(pg, params, options, {{"b", &buffer}});
  const int mine = s.passes(me);
  int longest = 0;
  for (int r = 0; r < world; ++r) longest = std::max(longest, s.passes(r));

  JoinOptions join_options;
  join_options.divide_by_initial_world_size = !s.divide_by_training;
  const size_t shadowed = ddp.join([&] {
    for (int k = 0; k < mine; ++k) {
      for (Tensor& g : grads) g.fill(0.0);  // zero_grad: a gradient no rank produced stays 0
      for (size_t i = 0; i < kSizes.size(); ++i) {
        if (!produces(s.find_unused, me, k, i)) continue;
        for (int64_t e = 0; e < kSizes[i]; ++e) grads[i].set_item(e, grad_value(me, k, i, e));
        ddp.mark_grad_ready(i);
      }
      buffer.set_item(0, k);
      buffer.set_item(1, me);
      ddp.finish_backward();
      const auto expect = averaged(s, world, k);
      int highest = 0;
      for (int r = 0; r < world; ++r) {
        if (s.passes(r) > k) highest = r;
      }
      EXPECT_EQ(buffer.item(1), highest) << "pass " << k << ": buffers come from the highest rank training";
      for (size_t i = 0; i < kSizes.size(); ++i) {
        for (int64_t e = 0; e < kSizes[i]; ++e) {
          ASSERT_NEAR(grads[i].item(e), expect[i][static_cast<size_t>(e)], kTolerance)
              << "pass " << k << ", parameter " << i << ", element " << e;
          values[i].set_item(e, values[i].item(e) - kLr * grads[i].item(e));
        }
      }
    }
  }, join_options);
  EXPECT_EQ(shadowed, static_cast<size_t>(longest - mine)) << "passes run for the others";
  if (mine > 0) {
    // A joined rank's own gradients stay those of its last pass (as in PyTorch).
    const auto last = averaged(s, world, mine - 1);
    for (size_t i = 0; i < kSizes.size(); ++i) {
      EXPECT_NEAR(grads[i].item(0), last[i][0], kTolerance) << "rank " << me << "'s gradient " << i << " was overwritten";
    }
  }
  const auto expect = trained(s, world);
  for (size_t i = 0; i < kSizes.size(); ++i) {
    for (int64_t e = 0; e < kSizes[i]; ++e) {
      ASSERT_NEAR(values[i].item(e), expect[i][static_cast<size_t>(e)], kTolerance)
          << "rank " << me << " ends with another model: parameter " << i << ", element " << e;
    }
  }
  if (longest > 0) {
    int last = 0;
    for (int r = 0; r < world; ++r) {
      if (s.passes(r) == longest) last = r;
    }
    EXPECT_EQ(buffer.item(0), longest - 1) << "the final buffers are those of the last pass";
    EXPECT_EQ(buffer.item(1), last) << "the final buffers are the highest last trainer's";
  }
  // The group goes on after join: a pass with every rank again.
  for (size_t i = 0; i < kSizes.size(); ++i) {
    grads[i].fill(me);
    ddp.mark_grad_ready(i);
  }
  ddp.finish_backward();
  EXPECT_NEAR(grads[0].item(0), (world - 1) / 2.0, kTolerance) << "a plain pass after join";
}

std::vector<Setting> settings() {
  return {
      {"rank r runs 1 + 2r passes", [](int r) { return 1 + 2 * r; }},
      {"rank 0 runs the most", [](int r) { return 4 - r; }},
      {"rank 0 runs none", [](int r) { return r == 0 ? 0 : 2 + r; }},
      {"all equal", [](int) { return 3; }},
      {"none runs any", [](int) { return 0; }},
      {"find_unused_parameters", [](int r) { return 1 + 2 * r; }, /*find_unused=*/true},
      {"one bucket per parameter, bucket views", [](int r) { return 4 - r; }, false, /*one_bucket_each=*/true},
      {"a comm hook of the user's, find_unused_parameters", [](int r) { return 1 + 2 * r; }, true, false,
       /*user_hook=*/true},
      {"over the ranks training: rank r runs 1 + 2r passes", [](int r) { return 1 + 2 * r; }, false, false, false,
       /*divide_by_training=*/true},
      {"over the ranks training: rank 0 runs none", [](int r) { return r == 0 ? 0 : 2 + r; }, false, false, false,
       true},
      {"over the ranks training: find_unused_parameters", [](int r) { return 4 - r; }, true, false, false, true},
      {"over the ranks training: one bucket per parameter, bucket views", [](int r) { return 1 + 2 * r; }, false,
       true, false, true},
  };
}

class DdpJoin : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(DdpJoin, UnevenPassesAverageOverTheWorldAndEndWithOneModel) {
  const auto& [backend, world] = GetParam();
  for (const Setting& s : settings()) {
    SCOPED_TRACE(s.name);
    testing::run_group(world, backend, [&](ProcessGroup& pg) { train_with_join(pg, s); });
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, DdpJoin,
                         ::testing::Combine(::testing::Values("gloo", "shm"), ::testing::Values(2, 3)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + std::to_string(std::get<1>(info.param)) + "ranks";
                         });

// A rank still training misses a gradient and catches the error every rank raises (the
// message says the next iteration starts clean): the rank that has joined goes on running
// passes for it instead of leaving join, so the next epoch's passes pair up again (found by
// a review: the joined rank left with the error, and its next epoch's gradients were
// averaged with the other's old ones).
TEST(DdpJoinErrors, AnErrorOfARankStillTrainingDoesNotEndAJoinedRanksJoin) {
  for (const char* backend : {"gloo", "shm"}) {
    SCOPED_TRACE(backend);
    testing::run_group(2, backend, [](ProcessGroup& pg) {
      const int me = pg.rank();
      Tensor w0 = Tensor::zeros({3}), g0 = Tensor::zeros({3}), w1 = Tensor::zeros({2}), g1 = Tensor::zeros({2});
      DistributedDataParallel ddp(pg, {{"p0", &w0, &g0}, {"p1", &w1, &g1}});
      // Epoch 0: rank 0 runs 1 pass, rank 1 runs 3 and skips p1 in its second.
      size_t errors = 0;
      const size_t shadowed = ddp.join([&] {
        for (int k = 0; k < (me == 0 ? 1 : 3); ++k) {
          g0.fill(1 + k);
          g1.fill(1 + k);
          ddp.mark_grad_ready(0);
          if (!(me == 1 && k == 1)) ddp.mark_grad_ready(1);
          try {
            ddp.finish_backward();
          } catch (const Error& e) {
            ++errors;
            EXPECT_NE(std::string(e.what()).find("'p1' (parameter 1) on rank 1"), std::string::npos) << e.what();
          }
        }
      });
      EXPECT_EQ(errors, me == 1 ? 1u : 0u);
      EXPECT_EQ(shadowed, me == 0 ? 2u : 0u);
      // Epoch 1: one pass each, averaged together.
      ddp.join([&] {
        g0.fill(10 * (me + 1));
        g1.fill(10 * (me + 1));
        ddp.mark_grad_ready(0);
        ddp.mark_grad_ready(1);
        ddp.finish_backward();
        EXPECT_DOUBLE_EQ(g0.item(0), 15.0) << "the epochs' passes paired up wrongly";
      });
    });
  }
}

// A collective of the program's own inside join pairs with no DDP op: with a rank that has
// joined, a count per rank summed in float32 (the join notice's dtype and shape) is a Desync
// naming both ops on both ranks, not a success with the notice's data (found by a review,
// when the notice was a plain int32 sum: the program's op took the notice's data).
TEST(DdpJoinErrors, AnOpOfTheProgramsOwnInsideJoinIsADesync) {
  for (const char* backend : {"gloo", "shm"}) {
    SCOPED_TRACE(backend);
    testing::run_group(2, backend, [](ProcessGroup& pg) {
      const int me = pg.rank();
      Tensor w = Tensor::zeros({3}), g = Tensor::zeros({3});
      DistributedDataParallel ddp(pg, {{"w", &w, &g}});
      try {
        ddp.join([&] {
          if (me == 0) return;  // joins at once
          g.fill(1);
          ddp.mark_grad_ready(0);
          ddp.finish_backward();
          Tensor counts = Tensor::zeros({pg.size()}, DType::kFloat32);
          counts.set_item(me, 5);
          pg.all_reduce(counts)->wait();
        });
        ADD_FAILURE() << "rank " << me << ": join ended well";
      } catch (const Desync& e) {
        EXPECT_NE(std::string(e.what()).find("premul_sum"), std::string::npos) << e.what();
      }
    });
  }
}

// A rank that leaves one join() with an exception of its program's own, catches it and
// enters the next, while the other still runs the first for it: the two joins' notices
// differ (premul_sum by the join's number), so both ranks fail with a Desync naming them,
// instead of the first join pairing with the second's passes and averaging gradients of
// different epochs (found by a review: both printed (100 + 201) / 2).
TEST(DdpJoinErrors, ARankInTheNextJoinIsADesyncNotAPairing) {
  for (const char* backend : {"gloo", "shm"}) {
    SCOPED_TRACE(backend);
    testing::run_group(2, backend, [](ProcessGroup& pg) {
      const int me = pg.rank();
      Tensor w = Tensor::zeros({2}), g = Tensor::zeros({2});
      DistributedDataParallel ddp(pg, {{"w", &w, &g}});
      auto one_pass = [&](float value) {
        g.fill(value);
        ddp.mark_grad_ready(0);
        ddp.finish_backward();
      };
      std::string error;
      try {
        ddp.join([&] {
          one_pass(1);
          if (me == 1) throw std::runtime_error("a bad batch");  // before its second pass
        });
      } catch (const Desync& e) {
        error = e.what();
      } catch (const std::runtime_error&) {
        try {
          ddp.join([&] { one_pass(100); });  // rank 1's next epoch
        } catch (const Desync& e) {
          error = e.what();
        }
      }
      EXPECT_NE(error.find("premul_sum(1)"), std::string::npos) << "rank " << me << ": " << error;
      EXPECT_NE(error.find("premul_sum(2)"), std::string::npos) << "rank " << me << ": " << error;
    });
  }
}

// A pass that fails alike on every rank (a gradient missed) still says who trains: when
// rank 0, the longest trainer, catches that error in its last passes, the final model is
// its own, not the one it had after its last pass that worked (found by a review: both
// ranks ended with rank 1's buffer of pass 0).
TEST(DdpJoinErrors, TheFinalModelIsTheLongestTrainersAlsoAfterPassesThatFailedAlike) {
  testing::run_group(2, "gloo", [](ProcessGroup& pg) {
    const int me = pg.rank();
    Tensor w0 = Tensor::zeros({2}), g0 = Tensor::zeros({2}), w1 = Tensor::zeros({2}), g1 = Tensor::zeros({2});
    Tensor running = Tensor::zeros({1});
    DistributedDataParallel ddp(pg, {{"p0", &w0, &g0}, {"p1", &w1, &g1}}, {}, {{"running", &running}});
    ddp.join([&] {
      for (int k = 0; k < (me == 0 ? 3 : 1); ++k) {
        running.fill(10 * (k + 1) + me);  // a running statistic: moves in every pass
        g0.fill(1);
        g1.fill(1);
        ddp.mark_grad_ready(0);
        if (k == 0) ddp.mark_grad_ready(1);  // passes 1 and 2 miss p1
        try {
          ddp.finish_backward();
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("got no gradient"), std::string::npos) << e.what();
        }
      }
    });
    EXPECT_EQ(running.item(0), 30.0) << "rank " << me << " ended with another rank's buffer than rank 0's last";
  });
}

TEST(DdpJoinMisuse, RefusedInsideABackwardPassUnderNoSyncAndNested) {
  testing::run_group(2, "gloo", [](ProcessGroup& pg) {
    Tensor value = Tensor::zeros({4}), grad = Tensor::zeros({4});
    DistributedDataParallel ddp(pg, {{"w", &value, &grad}});
    ddp.mark_grad_ready(0);
    EXPECT_THROW(ddp.join([] {}), InvalidArgument) << "inside a backward pass";
    ddp.finish_backward();
    {
      auto guard = ddp.no_sync();
      EXPECT_THROW(ddp.join([] {}), InvalidArgument) << "under no_sync()";
    }
    EXPECT_EQ(ddp.join([&] { EXPECT_THROW(ddp.join([] {}), InvalidArgument) << "nested"; }), 0u);
    // A loop that returns halfway through a pass is refused (its peers then fail too).
    try {
      ddp.join([&] { ddp.mark_grad_ready(0); });
      ADD_FAILURE() << "a loop that returned inside a backward pass was taken";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("inside a backward pass"), std::string::npos) << e.what();
    }
  });
}

// divide_by_initial_world_size=false rescales the built-in hooks' average over the world:
// refused, before any pass and alike on every rank, with a hook of the user's, and a hook of
// the user's registered inside. (Parameters that are not floating point are refused by the
// constructor: ddp_argument_checks_test.)
TEST(DdpJoinMisuse, DividingByTheRanksTrainingNeedsABuiltInHook) {
  testing::run_group(2, "gloo", [](ProcessGroup& pg) {
    JoinOptions over_training;
    over_training.divide_by_initial_world_size = false;
    auto refusal = [&](DistributedDataParallel& ddp) {
      try {
        ddp.join([] {}, over_training);
      } catch (const InvalidArgument& e) {
        return std::string(e.what());
      }
      return std::string("accepted");
    };
    Tensor value = Tensor::zeros({4}), grad = Tensor::zeros({4});
    DdpOptions with_hook;
    with_hook.comm_hook = [plain = allreduce_hook()](ProcessGroup& g, GradBucket& b) { return plain(g, b); };
    DistributedDataParallel hooked(pg, {{"w", &value, &grad}}, with_hook);
    EXPECT_NE(refusal(hooked).find("needs one of DDP's own comm hooks"), std::string::npos) << refusal(hooked);
    hooked.register_comm_hook(fp16_compress_hook());
    EXPECT_EQ(refusal(hooked), "accepted") << "a built-in hook registered later";
    hooked.join([&] {
      EXPECT_THROW(hooked.register_comm_hook(with_hook.comm_hook), InvalidArgument) << "a hook of the user's, inside";
      hooked.register_comm_hook(allreduce_hook());
    }, over_training);
  });
}

}  // namespace
}  // namespace ddp
}  // namespace distcomm
