// distcomm's DDP over a torch::nn::Module on N ranks with batch B per rank trains the same
// weights as one process on the combined batch N*B: to 1e-6 (absolute, float32) after
// 3 SGD steps, with the default buckets, one bucket per parameter (bucket_cap_mb = 0),
// gradients as bucket views, an explicit finish_backward(), no_sync accumulation and comm
// hooks. Real processes over the gloo plugin, 2 and 3 ranks.
#include <gtest/gtest.h>

#include <atomic>

#include "ddp/comm_hooks.h"
#include "tests/testing/multiprocess.h"
#include "tests/integrations/torch/torch_training.h"

namespace distcomm {
namespace torch {
namespace test {
namespace {

constexpr double kTolerance = 1e-6;

class TorchDdpEquivalence : public ::testing::TestWithParam<int> {};

TEST_P(TorchDdpEquivalence, DefaultBucketsAndOneBucketPerParameter) {
  distcomm::testing::run_group(GetParam(), "gloo", [](ProcessGroup& pg) {
    const Problem problem;
    const std::vector<at::Tensor> reference = train_single_process(pg.size(), problem);
    // The problem is not trivial: one rank's slice alone trains other weights.
    expect_same_weights(train_single_process(1, problem), train_single_process(1, problem), 0, "determinism");
    EXPECT_GT((train_single_process(1, problem)[0] - reference[0]).abs().max().item<double>(), 1e-4);
    for (double cap_mb : {25.0, 0.0}) {
      DdpOptions options;
      options.bucket_cap_mb = cap_mb;
      expect_same_weights(train_with_ddp(pg, problem, options), reference, kTolerance,
                          "bucket_cap_mb=" + std::to_string(cap_mb));
    }
  });
}

TEST_P(TorchDdpEquivalence, ExplicitFinishAndBucketViews) {
  distcomm::testing::run_group(GetParam(), "gloo", [](ProcessGroup& pg) {
    const Problem problem;
    const std::vector<at::Tensor> reference = train_single_process(pg.size(), problem);
    DdpOptions explicit_finish;
    explicit_finish.finish_in_backward = false;
    expect_same_weights(train_with_ddp(pg, problem, explicit_finish), reference, kTolerance, "explicit finish_backward");
    for (double cap_mb : {25.0, 0.001}) {
      DdpOptions views;
      views.gradient_as_bucket_view = true;
      views.bucket_cap_mb = cap_mb;
      expect_same_weights(train_with_ddp(pg, problem, views), reference, kTolerance,
                          "gradient_as_bucket_view, bucket_cap_mb=" + std::to_string(cap_mb));
    }
  });
}

TEST_P(TorchDdpEquivalence, NoSyncAccumulatesThreeMicroBatches) {
  distcomm::testing::run_group(GetParam(), "gloo", [](ProcessGroup& pg) {
    Problem problem;
    problem.micro_batches = 3;
    const std::vector<at::Tensor> reference = train_single_process(pg.size(), problem);
    for (bool explicit_finish : {false, true}) {
      // Averaging every micro-batch would give the same sums (the average is linear), so
      // count the reductions too: only the last micro-batch of each step may reduce.
      auto reductions = std::make_shared<std::atomic<int>>(0);
      DdpOptions options;
      options.bucket_cap_mb = 0;  // 6 buckets
      options.finish_in_backward = !explicit_finish;
      options.comm_hook = [reductions](ProcessGroup& group, ddp::GradBucket& bucket) {
        ++*reductions;
        return ddp::allreduce_hook()(group, bucket);
      };
      expect_same_weights(train_with_ddp(pg, problem, options), reference, kTolerance,
                          explicit_finish ? "no_sync, explicit finish" : "no_sync");
      EXPECT_EQ(reductions->load(), problem.steps * 6);
    }
  });
}

TEST_P(TorchDdpEquivalence, CompressingCommHook) {
  distcomm::testing::run_group(GetParam(), "gloo", [](ProcessGroup& pg) {
    const Problem problem;
    const std::vector<at::Tensor> reference = train_single_process(pg.size(), problem);
    DdpOptions options;
    options.comm_hook = ddp::bf16_compress_hook();  // about 2 significant digits on the wire
    const std::vector<at::Tensor> compressed = train_with_ddp(pg, problem, options);
    expect_same_weights(compressed, reference, 1e-2, "bf16_compress_hook");
    double largest = 0;
    for (size_t i = 0; i < compressed.size(); ++i) {
      largest = std::max(largest, (compressed[i] - reference[i]).abs().max().item<double>());
    }
    EXPECT_GT(largest, kTolerance) << "the hook did not compress";
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, TorchDdpEquivalence, ::testing::Values(2, 3),
                         [](const ::testing::TestParamInfo<int>& info) { return std::to_string(info.param) + "ranks"; });

}  // namespace
}  // namespace test
}  // namespace torch
}  // namespace distcomm
