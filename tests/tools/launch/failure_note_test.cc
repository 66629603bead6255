// The notes by which each machine's launcher leaves its first failure in the job's store
// (launch/job_failure_board.h), and which of them is the job's first.
#include <gtest/gtest.h>

#include "launch/job_failure_board.h"

namespace distcomm {
namespace launch {
namespace {

FailureNote note(int node, int64_t t, bool consequence, const std::string& text) {
  FailureNote n;
  n.node_rank = node;
  n.rank = node * 2;
  n.unix_time_ns = t;
  n.consequence = consequence;
  n.text = text;
  return n;
}

TEST(FailureNote, RoundTripsWithALineBreakInItsText) {
  const FailureNote n = note(1, 1234567890123, true, "rank 3 failed: a\nb");
  const std::optional<FailureNote> back = FailureNote::decode(n.encode());
  ASSERT_TRUE(back);
  EXPECT_EQ(back->node_rank, 1);
  EXPECT_EQ(back->rank, 2);
  EXPECT_EQ(back->unix_time_ns, 1234567890123);
  EXPECT_TRUE(back->consequence);
  EXPECT_EQ(back->text, "rank 3 failed: a\nb");
  EXPECT_FALSE(FailureNote::decode("distcomm-launcher-failure-1\nx\n0\n0\n0\n"));
  EXPECT_FALSE(FailureNote::decode("something else"));
}

TEST(FailureNote, TheEarliestRealFailureIsTheJobsFirst) {
  EXPECT_FALSE(earliest_failure({}));
  // node 0's ft stop (later) and node 1's death (earlier): the death.
  EXPECT_EQ(earliest_failure({note(0, 200, false, "ft stop"), note(1, 100, false, "SIGKILL")})->node_rank, 1);
  // A consequence is not named over a real failure, even an earlier one.
  EXPECT_EQ(earliest_failure({note(0, 50, true, "lost rank 3"), note(1, 100, false, "SIGKILL")})->node_rank, 1);
  // Among consequences only, the earliest.
  EXPECT_EQ(earliest_failure({note(0, 300, true, "a"), note(1, 100, true, "b")})->node_rank, 1);
  // A tie stays with the first given (the launcher gives its own first).
  EXPECT_EQ(earliest_failure({note(0, 100, false, "a"), note(1, 100, false, "b")})->node_rank, 0);
}

TEST(FailureNote, EachNodeHasAKeyOfItsOwn) { EXPECT_NE(first_failure_key(0), first_failure_key(1)); }

}  // namespace
}  // namespace launch
}  // namespace distcomm
