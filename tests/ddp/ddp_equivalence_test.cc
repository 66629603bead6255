// DDP on N ranks with batch B per rank == one process on the combined batch N*B: the
// gradients after every step and the parameters after K steps agree to 1e-5 (relative,
// float32), across bucket caps, bucket views, no_sync accumulation and comm hooks.
// Real processes over the gloo plugin, 2 and 3 ranks.
#include <gtest/gtest.h>

#include <sstream>


#include "ddp/comm_hooks.h"
#include "tests/ddp/training.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace ddp {
namespace test {
namespace {

constexpr double kTolerance = 1e-5;

std::string format_mb(double mb) {
  std::ostringstream s;
  s << mb;
  return s.str();
}

class DdpEquivalence : public ::testing::TestWithParam<int> {};

TEST_P(DdpEquivalence, AcrossBucketCaps) {
  distcomm::testing::run_group(GetParam(), "gloo", [](ProcessGroup& pg) {
    const Problem problem;
    const Trace reference = train_single_process(pg.size(), problem);
    struct Case {
      double cap_mb;
      size_t buckets;  // what that cap makes of the 6 gradients (13.5 KiB in all)
    };
    for (const Case c : {Case{0, 6}, Case{0.001, 2}, Case{1, 1}, Case{25, 1}, Case{1000, 1}}) {
      DdpOptions options;
      options.bucket_cap_mb = c.cap_mb;
      const Trace trace = train_with_ddp(pg, problem, options);
      const std::string context = "bucket_cap_mb=" + format_mb(c.cap_mb);
      EXPECT_EQ(trace.buckets.size(), c.buckets) << context;
      expect_same_trace(trace, reference, kTolerance, context);
    }
  });
}

TEST_P(DdpEquivalence, GradientAsBucketView) {
  distcomm::testing::run_group(GetParam(), "gloo", [](ProcessGroup& pg) {
    const Problem problem;
    const Trace reference = train_single_process(pg.size(), problem);
    for (double cap : {0.001, 1000.0}) {
      DdpOptions options;
      options.bucket_cap_mb = cap;
      options.gradient_as_bucket_view = true;
      expect_same_trace(train_with_ddp(pg, problem, options), reference, kTolerance,
                        "gradient_as_bucket_view, bucket_cap_mb=" + format_mb(cap));
    }
    // The gradients really live in one bucket: consecutive in reverse parameter order.
    auto model = make_model(problem, pg.rank());
    DdpOptions options;
    options.gradient_as_bucket_view = true;
    DistributedDataParallel ddp(pg, ddp_parameters(*model), options);
    const auto params = model->parameters();
    for (size_t i = params.size() - 1; i > 0; --i) {
      EXPECT_EQ(static_cast<const float*>(params[i - 1]->grad.data()),
                static_cast<const float*>(params[i]->grad.data()) + params[i]->grad.numel())
          << params[i - 1]->name << " does not follow " << params[i]->name << " in the bucket";
    }
  });
}

TEST_P(DdpEquivalence, NoSyncAccumulatesThreeMicroBatches) {
  distcomm::testing::run_group(GetParam(), "gloo", [](ProcessGroup& pg) {
    Problem problem;
    problem.micro_batches = 3;
    const Trace reference = train_single_process(pg.size(), problem);
    for (bool view : {false, true}) {
      // Averaging every micro-batch would give the same sums (the average is linear), so
      // count the reductions too: none may happen under no_sync().
      size_t reductions = 0;
      DdpOptions options;
      options.bucket_cap_mb = 0.001;
      options.gradient_as_bucket_view = view;
      options.comm_hook = [&reductions](ProcessGroup& group, GradBucket& bucket) {
        ++reductions;
        return allreduce_hook()(group, bucket);
      };
      const std::string context = std::string("no_sync x3, gradient_as_bucket_view=") + (view ? "true" : "false");
      const Trace trace = train_with_ddp(pg, problem, options);
      expect_same_trace(trace, reference, kTolerance, context);
      EXPECT_EQ(reductions, problem.steps * trace.buckets.size()) << context;
    }
  });
}

TEST_P(DdpEquivalence, CompressionHooksAreCloseButCompressed) {
  distcomm::testing::run_group(GetParam(), "gloo", [](ProcessGroup& pg) {
    const Problem problem;
    const Trace reference = train_single_process(pg.size(), problem);
    struct Case {
      const char* name;
      CommHook hook;
      double tolerance;  // float16 keeps 11 significant bits, bfloat16 8
    };
    for (const Case& c : {Case{"fp16", fp16_compress_hook(), 2e-3}, Case{"bf16", bf16_compress_hook(), 1e-2}}) {
      DdpOptions options;
      options.bucket_cap_mb = 0.001;
      options.comm_hook = c.hook;
      const Trace trace = train_with_ddp(pg, problem, options);
      expect_same_trace(trace, reference, c.tolerance, c.name);
      // Not exact: the gradients did travel in 16 bits.
      EXPECT_GT(relative_error(trace.grads[0][2], reference.grads[0][2]), 1e-6) << c.name;
    }
  });
}

TEST_P(DdpEquivalence, UserHookGetsEveryBucketInOrder) {
  distcomm::testing::run_group(GetParam(), "gloo", [](ProcessGroup& pg) {
    const Problem problem;
    const Trace reference = train_single_process(pg.size(), problem);
    std::vector<size_t> seen;
    DdpOptions options;
    options.bucket_cap_mb = 0;  // one bucket per gradient: 6 hook calls per step
    // A hand-written average: SUM, then divide once the sum has arrived.
    options.comm_hook = [&seen](ProcessGroup& group, GradBucket& bucket) {
      seen.push_back(bucket.index);
      EXPECT_EQ(bucket.parameter_indices.size(), 1u);
      WorkPtr sum = group.all_reduce(bucket.buffer);
      Tensor buffer = bucket.buffer;
      const int world = group.size();
      return then(sum, [buffer, world]() mutable {
        float* v = buffer.data_as<float>();
        for (int64_t i = 0; i < buffer.numel(); ++i) v[i] /= static_cast<float>(world);
      });
    };
    expect_same_trace(train_with_ddp(pg, problem, options), reference, kTolerance, "user hook");
    std::vector<size_t> expected;
    for (int step = 0; step < problem.steps; ++step) {
      for (size_t b = 0; b < 6; ++b) expected.push_back(b);
    }
    EXPECT_EQ(seen, expected);
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, DdpEquivalence, ::testing::Values(2, 3),
                         [](const ::testing::TestParamInfo<int>& info) { return std::to_string(info.param) + "ranks"; });

}  // namespace
}  // namespace test
}  // namespace ddp
}  // namespace distcomm
