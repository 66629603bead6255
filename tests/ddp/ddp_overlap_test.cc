// Communication overlaps backward: a bucket's all_reduce starts the moment the bucket is
// full, long before the last gradient is ready. And after the first iteration the buckets
// are rebuilt from the order gradients were actually marked (rank 0's order, on all ranks).
#include <gtest/gtest.h>

#include <chrono>

#include "examples/nn/loss.h"
#include "examples/nn/synthetic_data.h"
#include "tests/ddp/training.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace ddp {
namespace test {
namespace {

// Rank `rank`'s slice of step 0, the rows train_single_process uses for that rank too
// (make_regression draws rows in sequence, so a longer data set starts with the same rows).
void forward_backward(nn::Sequential& model, int64_t rows, int rank, const nn::GradReadyHook& hook) {
  const nn::Dataset data = nn::make_regression(rows * 4, 16, 4, 7);
  Tensor out = model.forward(nn::rows(data.inputs, rank * rows, rows));
  model.backward(nn::mse_loss(out, nn::rows(data.targets, rank * rows, rows)).grad, hook);
}

TEST(DdpOverlap, FirstBucketIsReducedBeforeTheLastGradientIsReady) {
  distcomm::testing::run_group(2, "gloo", [](ProcessGroup& pg) {
    Problem p;
    p.widths = {16, 64, 64, 64, 4};  // 8 parameters
    auto model = make_model(p, pg.rank());
    WorkPtr first_bucket;
    DdpOptions options;
    options.bucket_cap_mb = 0;  // a bucket per gradient: 8 buckets
    options.comm_hook = [&first_bucket](ProcessGroup& group, GradBucket& bucket) {
      WorkPtr work = allreduce_hook()(group, bucket);
      if (bucket.index == 0) first_bucket = work;
      return work;
    };
    DistributedDataParallel ddp(pg, ddp_parameters(*model), options);
    ASSERT_EQ(ddp.buckets().size(), 8u);
    size_t marked = 0;
    forward_backward(*model, p.batch_per_rank, pg.rank(), [&](size_t i) {
      if (++marked == 8) {  // the last gradient (fc0.weight) is about to be marked
        EXPECT_EQ(i, 0u);
        ASSERT_TRUE(first_bucket) << "no bucket was launched during backward";
        EXPECT_EQ(ddp.buckets_launched(), 7u);
        // It finishes while this rank's backward is still under way.
        first_bucket->wait(std::chrono::seconds(30));
        EXPECT_TRUE(first_bucket->is_completed());
      }
      ddp.mark_grad_ready(i);
    });
    ddp.finish_backward();
    const IterationStats& stats = ddp.last_stats();
    EXPECT_EQ(stats.iteration, 1u);
    EXPECT_EQ(stats.bucket_bytes.size(), 8u);
    EXPECT_EQ(stats.buckets_started_in_backward, 8u);  // every gradient was marked before finish
    EXPECT_TRUE(stats.unused_parameters.empty());
    EXPECT_GT(stats.overlapped_ms, 0.0) << stats.summary();
    EXPECT_LE(stats.overlapped_ms, stats.comm_ms + 1e-9) << stats.summary();
    size_t total = 0;
    for (nn::Parameter* param : model->parameters()) total += param->grad.nbytes();
    EXPECT_EQ(stats.bytes_reduced, total);
  });
}

class DdpRebuild : public ::testing::TestWithParam<int> {};

TEST_P(DdpRebuild, BucketsFollowRankZerosReadyOrderAfterTheFirstIteration) {
  distcomm::testing::run_group(GetParam(), "gloo", [](ProcessGroup& pg) {
    Problem p;  // 6 parameters: fc0.weight, fc0.bias, fc1.weight, fc1.bias, fc2.weight, fc2.bias
    p.steps = 1;
    const Trace reference = train_single_process(pg.size(), p);
    // Every rank marks in its own order; rank 0 marks in forward order.
    const std::vector<std::vector<size_t>> orders = {{0, 1, 2, 3, 4, 5}, {5, 4, 3, 2, 1, 0}, {2, 5, 0, 4, 1, 3}};
    for (bool rebuild : {true, false}) {
      auto model = make_model(p, pg.rank());
      DdpOptions options;
      options.bucket_cap_mb = 0.001;
      options.rebuild_buckets = rebuild;
      DistributedDataParallel ddp(pg, ddp_parameters(*model), options);
      std::vector<GradientSpec> specs;
      for (nn::Parameter* param : model->parameters()) specs.push_back({param->grad.numel(), DType::kFloat32, {}});
      const BucketCaps caps{1049, 1049};
      EXPECT_EQ(ddp.buckets(), assign_buckets(specs, reverse_order(6), caps));
      for (int iteration = 0; iteration < 2; ++iteration) {
        model->zero_grad();
        forward_backward(*model, p.batch_per_rank, pg.rank(), {});
        for (size_t i : orders[static_cast<size_t>(pg.rank())]) ddp.mark_grad_ready(i);
        ddp.finish_backward();
        const auto params = model->parameters();
        for (size_t i = 0; i < params.size(); ++i) {
          EXPECT_LE(relative_error(params[i]->grad, reference.grads[0][i]), 1e-5)
              << params[i]->name << ", iteration " << iteration << (rebuild ? "" : ", no rebuild");
        }
        EXPECT_EQ(ddp.buckets(), assign_buckets(specs, rebuild ? orders[0] : reverse_order(6), caps))
            << "iteration " << iteration;
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, DdpRebuild, ::testing::Values(2, 3),
                         [](const ::testing::TestParamInfo<int>& info) { return std::to_string(info.param) + "ranks"; });

}  // namespace
}  // namespace test
}  // namespace ddp
}  // namespace distcomm
