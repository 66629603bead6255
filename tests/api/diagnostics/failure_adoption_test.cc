// What a rank says of a failure that is not its own: a transfer's Timeout that follows the
// waits to a stopped rank, a loss passed along a ring that quotes its root once rather than
// the whole chain, and an adopted Desync whose table is folded in a large group.
#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "api/diagnostics/group_failure.h"
#include "api/diagnostics/progress_report.h"
#include "api/errors.h"
#include "api/store/hash_store.h"

namespace distcomm {
namespace {

OpFingerprint transfer(OpType op, int peer) {
  OpFingerprint f;
  f.op = op;
  f.p2p = true;
  f.set_tensor(Tensor::zeros({4}));
  f.root = peer;
  f.ordinal = 0;
  return f;
}

ProgressReport waiting_on(int rank, int peer) {
  ProgressReport r;
  r.rank = rank;
  r.pending.push_back({transfer(OpType::kRecv, peer), 5000});
  return r;
}

const char kStoppedNote[] = "its process 4242 on this host is stopped (SIGSTOP or Ctrl-Z; SIGCONT resumes it)";

// A ring of 8 where every rank receives from the one before and rank 5 is stopped: rank 1
// times out on its recv from rank 0, which waits on 7, 6, then 5. Rank 1's words must lead
// there, not stop at rank 0 (innocent).
TEST(P2pWaitChain, FollowsTheWaitsToAStoppedRank) {
  constexpr int kSize = 8, kStopped = 5, kMine = 1;
  std::vector<std::optional<ProgressReport>> by_rank(kSize);
  std::vector<std::string> notes(kSize);
  for (int r = 0; r < kSize; ++r) {
    if (r != kStopped) by_rank[r] = waiting_on(r, (r + kSize - 1) % kSize);
  }
  notes[kStopped] = kStoppedNote;
  // Rank 0 has finished its send to rank 1: only its recv from 7 is pending.
  const std::string words = explain_wait(transfer(OpType::kRecv, 0), by_rank, kMine, notes);
  EXPECT_NE(words.find("rank 0 has no transfer with this rank pending"), std::string::npos) << words;
  EXPECT_NE(words.find("it waits on rank 7, which waits on rank 6, which waits on rank 5, which did not report: " +
                       std::string(kStoppedNote)),
            std::string::npos)
      << words;
}

// A long ring names the first and last hops and counts the rest.
TEST(P2pWaitChain, ALongChainIsShortened) {
  constexpr int kSize = 16, kStopped = 5, kMine = 14;
  std::vector<std::optional<ProgressReport>> by_rank(kSize);
  std::vector<std::string> notes(kSize);
  for (int r = 0; r < kSize; ++r) {
    if (r != kStopped) by_rank[r] = waiting_on(r, (r + kSize - 1) % kSize);
  }
  notes[kStopped] = kStoppedNote;
  const std::string words = explain_wait(transfer(OpType::kRecv, 13), by_rank, kMine, notes);
  EXPECT_NE(words.find("it waits on rank 12, which waits on rank 11, which waits on 4 more ranks in turn, which "
                       "waits on rank 6"), std::string::npos)
      << words;
  EXPECT_NE(words.find("which waits on rank 5, which did not report: " + std::string(kStoppedNote)), std::string::npos)
      << words;
}

// Where the waits lead nowhere (the peer waits on this rank's own other transfer, a loop),
// a rank the kernel says is stopped is still named.
TEST(P2pWaitChain, NamesAStoppedRankWhereTheWaitsLeadNowhere) {
  std::vector<std::optional<ProgressReport>> by_rank(4);
  std::vector<std::string> notes(4);
  by_rank[0] = ProgressReport{};
  by_rank[0]->rank = 0;
  by_rank[1] = waiting_on(1, 0);
  notes[3] = kStoppedNote;
  const std::string words = explain_wait(transfer(OpType::kRecv, 0), by_rank, 1, notes);
  EXPECT_NE(words.find("rank 0 has no transfer with this rank pending"), std::string::npos) << words;
  EXPECT_NE(words.find("rank 3 did not report: " + std::string(kStoppedNote)), std::string::npos) << words;
  EXPECT_EQ(words.find("rank 2 did not report"), std::string::npos) << "no note, no guess: " << words;
}

std::string message_of_error(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  }
  return "";
}

Work recv_op(int rank, int size) {
  return Work(OpType::kRecv, 3,
              "rank " + std::to_string(rank) + "/" + std::to_string(size) + " group 'world' recv p2p#3 from " +
                  std::to_string(rank - 1));
}

// shm passes a failure along a ring, each rank quoting the one before ("rank 7 failed: rank
// 7/8 ...: rank 6 failed: rank 6/8 ..."), which grew with every hop until it was cut and the
// dead rank fell off its end. A rank whose words quote a quote says the first failure (the
// board's record) once, and still names the dead rank.
TEST(FailureAdoption, AQuoteOfAQuoteQuotesTheRootOnce) {
  auto board = std::make_shared<HashStore>();
  GroupFailure root(6, board), far(8, board);
  const std::string died = "rank 5 closed its connection (the process died or exited)";
  root.record(std::make_exception_ptr(PeerFailure(died)), recv_op(6, 10), 5);
  const std::string chain = "rank 7 failed: rank 7/10 group 'world' recv p2p#3 from 6: rank 6 failed: rank 6/10 "
                            "group 'world' recv p2p#3 from 5: " + died;
  const std::string said =
      message_of_error(far.record(std::make_exception_ptr(PeerFailure(chain)), recv_op(8, 10), 5));
  EXPECT_EQ(said.find("rank 7 failed"), std::string::npos) << said;
  EXPECT_NE(said.find("rank 6 of the group failed"), std::string::npos) << said;
  EXPECT_NE(said.find(died), std::string::npos) << said;
  ASSERT_TRUE(far.first().has_value());
  EXPECT_EQ(far.first()->culprit, 5);

  // One quote (the rank next to the failure) stays as it is: it already says it once.
  auto board2 = std::make_shared<HashStore>();
  GroupFailure root2(6, board2), next(7, board2);
  root2.record(std::make_exception_ptr(PeerFailure(died)), recv_op(6, 10), 5);
  const std::string one = "rank 6 failed: rank 6/10 group 'world' recv p2p#3 from 5: " + died;
  const std::string said2 = message_of_error(next.record(std::make_exception_ptr(PeerFailure(one)), recv_op(7, 10), 5));
  EXPECT_NE(said2.find("rank 6 failed: rank 6/10"), std::string::npos) << said2;
}

// A Desync adopted in a group of 16 quotes the finder's table folded into one line.
TEST(FailureAdoption, AnAdoptedDesyncFoldsTheTableInALargeGroup) {
  auto board = std::make_shared<HashStore>();
  GroupFailure finder(14, board), other(1, board);
  std::vector<int> world(16);
  std::iota(world.begin(), world.end(), 0);
  finder.set_world_ranks(world);
  other.set_world_ranks(world);
  const std::string table =
      "the ranks disagree on collective #1 (a rank skipped or added a collective, or passed other arguments). "
      "Each rank's op there:\n  ranks [0-4, 6-15]: all_reduce #1 float32[10] sum\n  rank 5:            all_reduce "
      "#1 int32[10] sum";
  finder.record(std::make_exception_ptr(Desync(table)), Work(OpType::kAllReduce, 1, "rank 14/16 group 'world' all_reduce #1"));
  const std::string said = message_of_error(
      other.record(std::make_exception_ptr(PeerFailure("connection closed")),
                   Work(OpType::kAllReduce, 1, "rank 1/16 group 'world' all_reduce #1")));
  EXPECT_NE(said.find("rank 14 of the group found that the ranks disagree"), std::string::npos) << said;
  EXPECT_EQ(said.find('\n'), std::string::npos) << "one line: " << said;
  EXPECT_NE(said.find("rank 5: all_reduce #1 int32[10] sum"), std::string::npos) << said;
}

}  // namespace
}  // namespace distcomm
