// Subgroups on a real GPU: once the parent group has its communicator, a subgroup's comes
// from ncclCommSplit of it (every rank of the parent takes part, members or not); before
// that, the subgroup sets its own up through the store. Either way its collectives reduce
// over its members only. Three ranks run on one GPU with DISTCOMM_TEST_SHARE_GPU=1.
#include <gtest/gtest.h>

#include <chrono>

#include "api/errors.h"
#include "api/store/prefix_store.h"
#include "api/process_group.h"
#include "tests/backends/nccl/cuda_tensor.h"
#include "tests/backends/nccl/cuda_test_env.h"
#include "tests/backends/nccl/gpu_group.h"
#include "tests/testing/require.h"

namespace distcomm {
namespace testing {
namespace {

// Whether subgroup rank 0 published an ncclUniqueId for the subgroup's first communicator
// (the store path), read from the subgroup's store as the nccl backend keys it: the first
// nccl backend over that prefix is "nccl/1/", its first communicator "comm0".
bool made_through_the_store(ProcessGroup& world, const std::string& subgroup) {
  PrefixStore store("pg/" + subgroup + "/cuda/nccl", world.store());
  return store.check({"nccl/1/comm0/unique_id"});
}

// all_reduce of (1 + world rank) over `group`, on this rank's GPU: the sum of its members'.
float sum_over(ProcessGroup& world, ProcessGroup& group) {
  CudaTensor t(Tensor::of<float>({1.0f + world.rank(), 10.0f * (1 + world.rank())}), test_device_of_rank(world.rank()));
  group.all_reduce(t.tensor())->wait();
  const Tensor back = t.to_host();
  EXPECT_EQ(back.data_as<float>()[1], 10.0f * back.data_as<float>()[0]);
  return back.data_as<float>()[0];
}

TEST(NcclSubgroupTest, ASubgroupOfAGroupWithACommunicatorIsSplitFromIt) {
  const std::string why = missing_gpus(3);
  if (!why.empty()) DISTCOMM_SKIP_WITHOUT(gpu_requirement()) << why;
  run_gpu_group(3, "nccl", [](ProcessGroup& pg) {
    EXPECT_EQ(sum_over(pg, pg), 6.0f);  // the world's communicator exists from here on
    auto sub = pg.new_group({0, 2});     // rank 1 takes part in the split too
    if (pg.rank() == 1) {
      EXPECT_EQ(sub, nullptr);
    } else {
      ASSERT_NE(sub, nullptr);
      EXPECT_EQ(sum_over(pg, *sub), 1.0f + 3.0f);
      EXPECT_FALSE(made_through_the_store(pg, sub->name())) << "set up through the store, not split";
    }
    // The parent goes on after the split.
    EXPECT_EQ(sum_over(pg, pg), 6.0f);
    pg.barrier()->wait();
  });
}

TEST(NcclSubgroupTest, SplitWithTwoColorsAndARankLeftOut) {
  const std::string why = missing_gpus(3);
  if (!why.empty()) DISTCOMM_SKIP_WITHOUT(gpu_requirement()) << why;
  run_gpu_group(3, "nccl", [](ProcessGroup& pg) {
    EXPECT_EQ(sum_over(pg, pg), 6.0f);
    // {0, 2} in reverse order by key, and {1} alone.
    auto halves = pg.split(pg.rank() % 2, -pg.rank());
    ASSERT_NE(halves, nullptr);
    EXPECT_EQ(sum_over(pg, *halves), pg.rank() == 1 ? 2.0f : 4.0f);
    if (pg.rank() != 1) {
      EXPECT_EQ(halves->rank(), pg.rank() == 2 ? 0 : 1);
    }
    auto without1 = pg.split(pg.rank() == 1 ? -1 : 0, 0);
    EXPECT_EQ(without1 == nullptr, pg.rank() == 1);
    if (without1) {
      EXPECT_EQ(sum_over(pg, *without1), 4.0f);
    }
    pg.barrier()->wait();
  });
}

TEST(NcclSubgroupTest, ASubgroupMadeBeforeTheParentsFirstOpSetsItselfUpThroughTheStore) {
  const std::string why = missing_gpus(3);
  if (!why.empty()) DISTCOMM_SKIP_WITHOUT(gpu_requirement()) << why;
  run_gpu_group(3, "nccl", [](ProcessGroup& pg) {
    auto sub = pg.new_group({1, 2});
    if (sub) {
      EXPECT_EQ(sum_over(pg, *sub), 2.0f + 3.0f);
      EXPECT_TRUE(sub->rank() != 0 || made_through_the_store(pg, sub->name()));
    }
    EXPECT_EQ(sum_over(pg, pg), 6.0f);
    pg.barrier()->wait();
  });
}

// A rank whose new_group list is refused still takes part in the split (as left out): the
// members whose lists agree get their subgroup at once, not after their split's timeout
// (which before this waited for the refused rank), and the parent goes on.
TEST(NcclSubgroupTest, ARankWhoseListIsRefusedStillLetsTheOthersSplit) {
  const std::string why = missing_gpus(3);
  if (!why.empty()) DISTCOMM_SKIP_WITHOUT(gpu_requirement()) << why;
  GroupHarnessOptions options;
  options.op_timeout = std::chrono::milliseconds(40000);
  run_gpu_group(3, "nccl", [](ProcessGroup& pg) {
    EXPECT_EQ(sum_over(pg, pg), 6.0f);  // the split path from here on
    const auto start = std::chrono::steady_clock::now();
    // Rank 2 lists itself with 0 and 1, which agree on [0, 1]: its members refuse it.
    if (pg.rank() == 2) {
      EXPECT_THROW(pg.new_group({0, 1, 2}), InvalidArgument);
    } else {
      auto sub = pg.new_group({0, 1});
      ASSERT_NE(sub, nullptr);
      EXPECT_EQ(sum_over(pg, *sub), 1.0f + 2.0f);
    }
    // Rank 0 refuses its own list.
    if (pg.rank() == 0) {
      EXPECT_THROW(pg.new_group({0, 3}), InvalidArgument);
    } else {
      auto sub = pg.new_group({1, 2});
      ASSERT_NE(sub, nullptr);
      EXPECT_EQ(sum_over(pg, *sub), 2.0f + 3.0f);
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30)) << "a split waited out its timeout";
    EXPECT_EQ(sum_over(pg, pg), 6.0f);
    pg.barrier()->wait();
  }, options);
}

}  // namespace
}  // namespace testing
}  // namespace distcomm
