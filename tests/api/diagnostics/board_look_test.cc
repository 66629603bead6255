// The stall watch's look at its group's board (api/diagnostics/board_look.h) over a store
// whose server is stopped (SIGSTOP: connections stay open, nothing answers): when a look
// that goes unanswered takes the store for silent, process-wide. Only when the store had the
// full answer wait to answer, in one look or in looks cut one after another; not when a
// sooner deadline around the look (an op's) cut it short: that op's Timeout would then say
// the store did not answer, and its record would go unpublished, of a store merely slow.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "api/diagnostics/board_look.h"
#include "api/diagnostics/group_failure.h"
#include "api/diagnostics/stall_watch.h"
#include "api/errors.h"
#include "api/store/internal/call_deadline.h"
#include "api/store/tcp_store.h"
#include "tests/testing/forked_store_server.h"

namespace distcomm {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

int64_t ms_since(Clock::time_point t) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - t).count();
}

// One look at `board`, as the watch makes it; whether it called `unanswered`, and how it
// ended ("" when answered).
struct LookResult {
  bool marked = false;
  std::string error;
};
LookResult look(Store& board, milliseconds answer_wait) {
  LookResult r;
  try {
    internal::read_idle_look(board, "watch/request", "failure", answer_wait, [&] { r.marked = true; });
  } catch (const internal::StoreCallCutShort& e) {
    r.error = e.what();
  }
  return r;
}

TEST(BoardLook, ALookItsOwnAnswerWaitCutsShortTakesTheStoreForSilent) {
  testing::ForkedStoreServer server;
  auto board = server.client(milliseconds(60000));
  board->set("warm", "1");  // connected
  server.stop();
  const auto start = Clock::now();
  const LookResult r = look(*board, milliseconds(1000));
  EXPECT_FALSE(r.error.empty());
  EXPECT_TRUE(r.marked) << "a store that did not answer for the full answer wait was not taken for silent";
  EXPECT_GE(ms_since(start), 950);
  server.kill();
}

// An op's deadline 150 ms away cuts the look short: the store had 150 ms, not the answer
// wait, and is not taken for silent (it was, process-wide: the op's Timeout then said "the
// others could not be asked: the store's server ... did not answer").
TEST(BoardLook, ALookASoonerDeadlineCutsShortDoesNotTakeTheStoreForSilent) {
  testing::ForkedStoreServer server;
  auto board = server.client(milliseconds(60000));
  board->set("warm", "1");
  server.stop();
  LookResult r;
  {
    internal::StoreCallDeadline op_deadline(Clock::now() + milliseconds(150), "an op's deadline");
    r = look(*board, milliseconds(3000));
  }
  EXPECT_FALSE(r.error.empty());
  EXPECT_FALSE(r.marked) << "a look cut short after 150 ms by an op's deadline took the store for silent";
  // Answered again: nothing of that cut look is left to count against the store.
  server.cont();
  const LookResult answered = look(*board, milliseconds(3000));
  EXPECT_TRUE(answered.error.empty()) << answered.error;
  EXPECT_FALSE(answered.marked);
  server.kill();
}

// The look at an op's deadline that a sooner deadline cuts short when the store has left it
// unanswered for all but a moment of the answer wait: the store is taken for silent then,
// not after the op's Timeout has waited the answer wait twice more (a hierarchy's levels,
// the store's server stopped a tick after its last answer).
TEST(BoardLook, ALookCutShortNearTheEndOfTheAnswerWaitTakesTheStoreForSilent) {
  testing::ForkedStoreServer server;
  auto board = server.client(milliseconds(60000));
  board->set("warm", "1");
  server.stop();
  internal::StoreCallDeadline op_deadline(Clock::now() + milliseconds(2700), "an op's deadline");
  const LookResult r = look(*board, milliseconds(3000));
  EXPECT_FALSE(r.error.empty());
  EXPECT_TRUE(r.marked) << "2.7 s of 3 unanswered did not take the store for silent";
  server.kill();
}

OpFingerprint all_reduce(uint64_t seq) {
  OpFingerprint f;
  f.op = OpType::kAllReduce;
  f.seq = seq;
  return f;
}

// The whole path: the watch's look begins while the store is stopped, the op's deadline cuts
// it short, the store answers again right after. The op's Timeout must not say the store did
// not answer, and its record must be published on the board for the others.
TEST(BoardLook, AnOpsDeadlineCuttingTheLookDoesNotBlameTheStore) {
  testing::ForkedStoreServer server;
  auto board = server.client(milliseconds(60000));
  GroupFailure failure{0, board};
  StallWatchOptions o;
  o.rank = 0;
  o.size = 2;  // rank 1 never reports
  o.board = board;
  o.tick = milliseconds(200);
  StallWatch watch(o, failure);
  WorkPtr late = std::make_shared<Work>(OpType::kAllReduce, 0, "rank 0/2 group 'world' all_reduce #0");
  const auto issued = Clock::now();
  watch.issued(all_reduce(0), late, milliseconds(1000));
  // Stopped once the op is watched: the next look (within a tick) is bounded by the op's
  // deadline (+0.2 s), 1.2 s in, and cut short then, having waited about 1 s; the store
  // answers again after that.
  std::this_thread::sleep_for(milliseconds(300));
  server.stop();
  std::this_thread::sleep_for(milliseconds(1500) - (Clock::now() - issued));
  server.cont();
  while (!failure.failed() && ms_since(issued) < 20000) std::this_thread::sleep_for(milliseconds(20));
  ASSERT_TRUE(failure.failed());
  const std::string message = failure.first()->message;
  EXPECT_EQ(failure.first()->kind, FailureRecord::Kind::kTimeout) << message;
  EXPECT_EQ(message.find("the store's server"), std::string::npos) << message;
  EXPECT_EQ(message.find("could not be asked"), std::string::npos) << message;
  EXPECT_FALSE(GroupFailure::store_unanswered(board));
  late->finish();
  watch.stop();
  // Published for the others (a read of the board's key; the record's rank is 0).
  auto reader = server.client(milliseconds(10000));
  ASSERT_TRUE(reader->check({"failure"})) << "the failure record was not published: " << message;
  server.kill();
}

}  // namespace
}  // namespace distcomm
