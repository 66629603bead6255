// The part each rank of a group takes in ncclCommSplit when a subgroup is made from it.
#include "backends/nccl/subgroup_split.h"

#include <gtest/gtest.h>

#include "api/errors.h"

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

}  // namespace
}  // namespace nccl
}  // namespace distcomm
