// Which counts the mpi backend hands to one MPI call (backends/mpi/mpi_counts.h): an
// all_to_all is limited per peer (count and displacement), not on its total, and a
// gather-like op per rank. Unit-tested here because a real op over 2^31 elements needs more
// than 8 GiB and minutes on the test machines.
#include "backends/mpi/mpi_counts.h"

#include <gtest/gtest.h>

#include <climits>
#include <string>
#include <vector>

namespace distcomm {
namespace mpi {
namespace {

constexpr int64_t kMax = INT_MAX;

TEST(MpiCounts, AllToAllOverIntMaxInTotalIsAllowedWhenEachPeerFits) {
  // The user's case: 2 ranks, 1073741825 elements each way, 2147483650 in total.
  EXPECT_EQ(alltoallv_count_problem({1073741825, 1073741825}, "input"), "");
  EXPECT_EQ(alltoallv_count_problem({kMax, 0, 0}, "output"), "");
  // The last block starts at INT_MAX exactly: still an int displacement.
  EXPECT_EQ(alltoallv_count_problem({kMax, kMax}, "input"), "");
  // Empty blocks past the int range need no displacement.
  EXPECT_EQ(alltoallv_count_problem({kMax, kMax, 0, 0}, "input"), "");
  EXPECT_EQ(alltoallv_count_problem({}, "input"), "");
}

TEST(MpiCounts, AllToAllPeerCountOverIntMaxIsRefusedNamingThePerPeerLimit) {
  const std::string p = alltoallv_count_problem({1, kMax + 1}, "input");
  EXPECT_NE(p.find("input block for rank 1 has 2147483648 elements"), std::string::npos) << p;
  EXPECT_NE(p.find("per peer, not on the total"), std::string::npos) << p;
  EXPECT_NE(p.find("split the all_to_all"), std::string::npos) << p;
}

TEST(MpiCounts, AllToAllDisplacementOverIntMaxIsRefused) {
  const std::string p = alltoallv_count_problem({kMax, 1, 1}, "output");
  EXPECT_NE(p.find("output block for rank 2 starts at element 2147483648"), std::string::npos) << p;
  EXPECT_NE(p.find("displacement"), std::string::npos) << p;
}

TEST(MpiCounts, GatherLikeOpsAreLimitedPerRank) {
  EXPECT_EQ(per_rank_count_problem("all_gather", kMax), "");
  const std::string p = per_rank_count_problem("all_gather", kMax + 1);
  EXPECT_NE(p.find("all_gather of 2147483648 elements per rank"), std::string::npos) << p;
  EXPECT_NE(p.find("per rank, not on the total"), std::string::npos) << p;
}

// max_count_per_call set lower: these ops are not split, so the lower limit refuses them
// (they ran as if it were INT_MAX), and the text names the setting.
TEST(MpiCounts, ConfiguredLimitRefusesGatherLikeAndAllToAll) {
  EXPECT_EQ(per_rank_count_problem("all_gather", 1000, 1000), "");
  const std::string p = per_rank_count_problem("all_gather", 1500, 1000);
  EXPECT_NE(p.find("max_count_per_call (1000"), std::string::npos) << p;
  EXPECT_EQ(alltoallv_count_problem({1000, 1000, 1000}, "input", 1000), "");
  const std::string q = alltoallv_count_problem({1000, 1001}, "output", 1000);
  EXPECT_NE(q.find("output block for rank 1 has 1001 elements"), std::string::npos) << q;
  EXPECT_NE(q.find("max_count_per_call (1000"), std::string::npos) << q;
}

}  // namespace
}  // namespace mpi
}  // namespace distcomm
