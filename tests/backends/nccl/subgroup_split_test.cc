// The part each rank of a group takes in ncclCommSplit when a subgroup is made from it.
#include "backends/nccl/subgroup_split.h"

#include <gtest/gtest.h>

#include <future>
#include <vector>

#include "api/errors.h"
#include "api/store/hash_store.h"

namespace distcomm {
namespace nccl {
namespace {

TEST(SplitPartTest, MembersShareAColorAndTakeTheirSubgroupRankAsKey) {
  const std::vector<int> members{3, 1, 4};  // subgroup ranks 0, 1, 2
  EXPECT_EQ(split_part(3, members, true).color, 1);
  EXPECT_EQ(split_part(1, members, true).color, 1);
  EXPECT_EQ(split_part(4, members, true).color, 1);
  EXPECT_EQ(split_part(3, members, true).key, 0);
  EXPECT_EQ(split_part(1, members, true).key, 1);
  EXPECT_EQ(split_part(4, members, true).key, 2);
}

TEST(SplitPartTest, DisjointSubgroupsOfOneSplitGetDistinctColors) {
  const SplitPart a = split_part(0, {2, 0}, true);
  const SplitPart b = split_part(1, {1, 3}, true);
  EXPECT_NE(a.color, b.color);
  EXPECT_GE(a.color, 0);
  EXPECT_GE(b.color, 0);
}

TEST(SplitPartTest, ARankLeftOutTakesNoColor) {
  EXPECT_EQ(split_part(2, {0, 1}, false).color, kSplitNoColor);
  EXPECT_EQ(split_part(2, {}, false).color, kSplitNoColor);
}

TEST(SplitPartTest, AMemberMissingFromTheListIsRefused) {
  EXPECT_THROW(split_part(5, {0, 1}, true), InvalidArgument);
}

using Clock = std::chrono::steady_clock;

// Each of `can.size()` ranks asks at once, on a thread of its own; their answers.
std::vector<bool> ask_all(Store& store, uint64_t index, const std::vector<bool>& can) {
  std::vector<std::future<bool>> asked;
  const int n = static_cast<int>(can.size());
  for (int r = 0; r < n; ++r) {
    asked.push_back(std::async(std::launch::async, [&store, index, n, c = can[r]] {
      return every_rank_can_split(store, "g/", index, n, c, Clock::now() + std::chrono::seconds(20), "test");
    }));
  }
  std::vector<bool> out;
  for (auto& a : asked) out.push_back(a.get());
  return out;
}

TEST(EveryRankCanSplitTest, AllAgreeToSplitOnlyWhenEveryRankCan) {
  HashStore store;
  EXPECT_EQ(ask_all(store, 0, {true, true, true, true}), std::vector<bool>(4, true));
  // One rank whose communicator is not set up yet (another thread is still setting it
  // up): nobody splits, so nobody waits in ncclCommSplit for it.
  EXPECT_EQ(ask_all(store, 1, {true, false, true, true}), std::vector<bool>(4, false));
  EXPECT_EQ(ask_all(store, 2, {false, false, false, false}), std::vector<bool>(4, false));
  EXPECT_EQ(ask_all(store, 3, {true, true, true, false}), std::vector<bool>(4, false));
}

TEST(EveryRankCanSplitTest, AGroupKeepsOneKeyWhateverTheSubgroupsItMade) {
  HashStore store;
  for (uint64_t i = 0; i < 50; ++i) {
    const bool all = i % 3 != 1;
    EXPECT_EQ(ask_all(store, i, {true, all, true}), std::vector<bool>(3, all)) << "vote " << i;
  }
  // The last vote's answer, nothing else (3 keys a vote before).
  EXPECT_EQ(store.num_keys(), 1);
  EXPECT_TRUE(store.check({"g/subgroup49/answer"}));
}

TEST(EveryRankCanSplitTest, ARankThatCannotDoesNotWaitForTheOthers) {
  HashStore store;
  // The only rank to come: the others may never (no nccl backend there).
  EXPECT_FALSE(every_rank_can_split(store, "g/", 0, 3, false, Clock::now() + std::chrono::seconds(60), "test"));
}

TEST(EveryRankCanSplitTest, ARankAloneDecidesForItself) {
  HashStore store;
  EXPECT_TRUE(every_rank_can_split(store, "g/", 0, 1, true, Clock::now(), "test"));
  EXPECT_FALSE(every_rank_can_split(store, "g/", 1, 1, false, Clock::now(), "test"));
}

TEST(EveryRankCanSplitTest, ARankThatNeverComesIsATimeoutNamingTheCount) {
  HashStore store;
  try {
    every_rank_can_split(store, "g/", 0, 3, true, Clock::now() + std::chrono::milliseconds(100),
                         "rank 0/3 subgroup #0");
    FAIL() << "no Timeout";
  } catch (const Timeout& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("rank 0/3 subgroup #0"), std::string::npos) << m;
    EXPECT_NE(m.find("1 of 3 ranks"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace nccl
}  // namespace distcomm
