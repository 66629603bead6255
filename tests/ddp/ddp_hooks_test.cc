// DDP's comm hooks and buffer sync at 3 ranks, over the in_process test plugin (3
// ProcessGroups of this process, one thread each): which buckets a hook sees and in what
// order, that a registered hook replaces the default, sees the gradients alone and its result
// is what DDP writes back, and that sync_buffers() copies rank 0's buffers.
#include <gtest/gtest.h>

#include <set>

#include "ddp/distributed_data_parallel.h"
#include "tests/testing/in_process_group.h"

namespace distcomm {
namespace ddp {
namespace {

using distcomm::testing::in_process_world;
using distcomm::testing::on_every_rank;

struct Seen {
  size_t index, num_buckets;
  bool is_last;
  std::vector<size_t> parameters;
  int64_t numel;
};

TEST(DdpHooks, ARegisteredHookSeesEveryBucketInOrderAndItsResultIsWrittenBack) {
  auto world = in_process_world(3);
  on_every_rank(world, [](ProcessGroup& pg) {
    std::vector<Tensor> values, grads;
    for (int p = 0; p < 3; ++p) {
      values.push_back(Tensor::zeros({4}));
      grads.push_back(Tensor::zeros({4}));
    }
    std::vector<NamedParameter> params;
    for (int p = 0; p < 3; ++p) params.push_back({"p" + std::to_string(p), &values[p], &grads[p]});
    DdpOptions o;
    o.bucket_cap_mb = 0;  // a bucket per parameter
    o.rebuild_buckets = false;
    DistributedDataParallel ddp(pg, params, o);
    auto backward = [&] {
      for (auto& g : grads) g.fill(pg.rank() + 1);  // 1, 2, 3: sum 6, average 2
      for (size_t p = 3; p-- > 0;) ddp.mark_grad_ready(p);
      ddp.finish_backward();
    };
    backward();
    for (const auto& g : grads) EXPECT_EQ(g.to_doubles(), std::vector<double>(4, 2)) << "default hook: the average";

    std::vector<Seen> seen;
    ddp.register_comm_hook([&seen](ProcessGroup& group, GradBucket& bucket) {
      seen.push_back({bucket.index, bucket.num_buckets, bucket.is_last(), bucket.parameter_indices, bucket.buffer.numel()});
      return group.all_reduce(bucket.buffer);  // a sum, not the average
    });
    backward();
    for (const auto& g : grads) EXPECT_EQ(g.to_doubles(), std::vector<double>(4, 6)) << "the hook's sum";
    ASSERT_EQ(seen.size(), 3u);
    std::set<size_t> covered;
    for (size_t b = 0; b < seen.size(); ++b) {
      EXPECT_EQ(seen[b].index, b) << "launch order";
      EXPECT_EQ(seen[b].num_buckets, 3u);
      EXPECT_EQ(seen[b].is_last, b == 2) << "bucket " << b;
      EXPECT_EQ(seen[b].numel, 4) << "bucket " << b << ": its gradient and nothing else";
      covered.insert(seen[b].parameters.begin(), seen[b].parameters.end());
    }
    EXPECT_EQ(covered, (std::set<size_t>{0, 1, 2}));
  });
}

// DDP lets its per-gradient flags ride only through its own hooks (reducer.h).
TEST(DdpHooks, OnlyTheBuiltInHooksAreRecognisedAsBuiltIn) {
  EXPECT_TRUE(is_builtin_hook(allreduce_hook()));
  EXPECT_TRUE(is_builtin_hook(fp16_compress_hook()));
  EXPECT_TRUE(is_builtin_hook(bf16_compress_hook()));
  CommHook builtin = allreduce_hook();
  EXPECT_FALSE(is_builtin_hook([builtin](ProcessGroup& pg, GradBucket& b) { return builtin(pg, b); }));
  EXPECT_FALSE(is_builtin_hook(CommHook()));
}

TEST(DdpHooks, GradBucketIsLastOnlyForTheLastIndex) {
  GradBucket b;
  b.num_buckets = 3;
  for (size_t i = 0; i < 3; ++i) {
    b.index = i;
    EXPECT_EQ(b.is_last(), i == 2) << i;
  }
}

TEST(DdpBuffers, SyncBuffersCopiesRankZerosBuffersToEveryRank) {
  auto world = in_process_world(3);
  on_every_rank(world, [](ProcessGroup& pg) {
    Tensor value = Tensor::zeros({2}), grad = Tensor::zeros({2});
    Tensor running_mean = Tensor::of<float>({float(7 + pg.rank()), 1});
    Tensor steps = Tensor::of<int64_t>({pg.rank() * 10});
    DistributedDataParallel ddp(pg, {{"w", &value, &grad}}, DdpOptions(),
                                {{"running_mean", &running_mean}, {"steps", &steps}});
    EXPECT_EQ(running_mean.to_doubles(), (std::vector<double>{7, 1})) << "construction copies rank 0's";
    running_mean.fill(100 + pg.rank());
    steps.fill(5 + pg.rank());
    ddp.sync_buffers();
    EXPECT_EQ(running_mean.to_doubles(), (std::vector<double>{100, 100})) << "rank " << pg.rank();
    EXPECT_EQ(steps.to_doubles(), (std::vector<double>{5})) << "rank " << pg.rank();
  });
}

}  // namespace
}  // namespace ddp
}  // namespace distcomm
