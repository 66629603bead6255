// ft::in_member_terms (ft/member_terms.h): a step's failure names members, not a mix of
// member ids and the generation's group ranks. A chaos soak's line read "rank4: ... rank 4
// (pid 5908) died", the first a member id, the second group rank 4, which was member rank5.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ft/member_terms.h"

namespace distcomm {
namespace ft {
namespace {

// Generation 3 after rank1 was lost: group rank r is not member "rank<r>".
const std::vector<std::string> kMembers = {"rank0", "rank2", "rank3", "rank4", "rank5"};

TEST(FtMemberTerms, AGroupRankWithItsPidBecomesItsMember) {
  EXPECT_EQ(in_member_terms("shm: rank 4 (pid 5908) died: its process ended while this op waited for it", kMembers),
            "shm: member 'rank5' (group rank 4, pid 5908) died: its process ended while this op waited for it");
}

TEST(FtMemberTerms, ABareGroupRankBecomesItsMember) {
  EXPECT_EQ(in_member_terms("rank 1 closed its connection (the process died or exited)", kMembers),
            "member 'rank2' (group rank 1) closed its connection (the process died or exited)");
  EXPECT_EQ(in_member_terms("rank 0/5 group 'ft' all_reduce #3: rank 3 has not issued #3 yet", kMembers),
            "member 'rank0' (group rank 0/5) group 'ft' all_reduce #3: member 'rank4' (group rank 3) has not issued "
            "#3 yet");
}

TEST(FtMemberTerms, OtherRanksAndMemberIdsAreLeftAsTheyAre) {
  for (const std::string& text : {std::string("member rank2 is gone: its process (pid 812) has exited"),
                                 std::string("local rank 1, world rank 3, group rank 2"),
                                 std::string("rank 9 (pid 1) is not in this group"), std::string("frank 2"),
                                 std::string("rank 2x")}) {
    EXPECT_EQ(in_member_terms(text, kMembers), text);
  }
}

TEST(FtMemberTerms, AListOfRanksGetsTheGroupsMembersAppended) {
  EXPECT_EQ(in_member_terms("ranks [1, 3] (pids 7, 9) have died too", {"rank0", "rank2", "rank3", "rank5"}),
            "ranks [1, 3] (pids 7, 9) have died too [group ranks: 0 rank0, 1 rank2, 2 rank3, 3 rank5]");
}

// hier's levels name their own ranks: "rank 3 (world rank 4)" is the member of world rank 4,
// and a rank of a group of another size ("rank 1/2", a level's) is not this group's
// (helper-217's review: both were rewritten as group ranks, naming the wrong member).
TEST(FtMemberTerms, ALevelsRankIsNamedByItsWorldRank) {
  EXPECT_EQ(in_member_terms("rank 3 (world rank 4) of the group failed first: timeout", kMembers),
            "member 'rank5' (its level's rank 3, world rank 4) of the group failed first: timeout");
  EXPECT_EQ(in_member_terms("rank 1/2 group 'ft/hier_local0' all_reduce #7", kMembers),
            "rank 1/2 group 'ft/hier_local0' all_reduce #7");
  EXPECT_EQ(in_member_terms("rank 0 (world rank 9) died", kMembers), "rank 0 (world rank 9) died");
}

// Said again (a verdict read back and quoted), it stays as it is.
TEST(FtMemberTerms, SayingItTwiceChangesNothing) {
  const std::string once = in_member_terms("shm: rank 4 (pid 5908) died", kMembers);
  EXPECT_EQ(in_member_terms(once, kMembers), once);
}

}  // namespace
}  // namespace ft
}  // namespace distcomm
