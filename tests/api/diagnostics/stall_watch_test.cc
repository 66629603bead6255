// The stall watch's ring of recent ops (api/diagnostics/stall_watch.h): what it keeps of an
// op once the op has finished, and that an unfinished op stays watched to its deadline. One
// rank over an in-memory store: the ring does not depend on the group's size.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>

#include "api/diagnostics/group_failure.h"
#include "api/diagnostics/stall_watch.h"
#include "api/store/hash_store.h"

namespace distcomm {
namespace {

using std::chrono::milliseconds;

OpFingerprint collective(uint64_t seq) {
  OpFingerprint f;
  f.op = OpType::kAllReduce;
  f.seq = seq;
  return f;
}

WorkPtr op(uint64_t seq) {
  return std::make_shared<Work>(OpType::kAllReduce, seq, "rank 0/1 group 'world' all_reduce #" + std::to_string(seq));
}

struct Watched {
  StorePtr store = std::make_shared<HashStore>();
  GroupFailure failure{0, store};
  StallWatch watch;
  explicit Watched(milliseconds tick = milliseconds(500)) : watch(options(store, tick), failure) {}
  ~Watched() { watch.stop(); }
  static StallWatchOptions options(StorePtr store, milliseconds tick) {
    StallWatchOptions o;
    o.board = std::move(store);
    o.tick = tick;
    return o;
  }
};

TEST(StallWatchRing, LetsGoOfAFinishedOpsWorkAtTheNextOp) {
  Watched w;
  std::weak_ptr<Work> first;
  {
    WorkPtr work = op(0);
    first = work;
    w.watch.issued(collective(0), work, milliseconds(60000));
    work->finish();
  }
  EXPECT_FALSE(first.expired()) << "nothing was issued since: the ring still holds it";
  WorkPtr second = op(1);
  w.watch.issued(collective(1), second, milliseconds(60000));
  EXPECT_TRUE(first.expired()) << "a finished op's Work is let go when the next op is issued, not 256 ops later";
  second->finish();
}

TEST(StallWatchRing, KeepsFinishedOpsBehindAnUnfinishedOneUntilItEnds) {
  Watched w;
  WorkPtr running = op(0);
  w.watch.issued(collective(0), running, milliseconds(60000));
  std::weak_ptr<Work> later;
  {
    WorkPtr work = op(1);
    later = work;
    w.watch.issued(collective(1), work, milliseconds(60000));
    work->finish();
  }
  WorkPtr third = op(2);
  w.watch.issued(collective(2), third, milliseconds(60000));
  EXPECT_FALSE(later.expired()) << "the sweep stops at the oldest unfinished op";
  EXPECT_EQ(running.use_count(), 2) << "the unfinished op is still held by the ring";
  running->finish();
  third->finish();
  w.watch.issued(collective(3), op(3), milliseconds(60000));
  EXPECT_TRUE(later.expired());
  EXPECT_EQ(running.use_count(), 1);
}

TEST(StallWatchRing, AnUnfinishedOpAfterManyFinishedOnesStillTimesOut) {
  Watched w(milliseconds(50));
  for (uint64_t seq = 0; seq < 3 * StallWatch::kTracked; ++seq) {
    WorkPtr work = op(seq);
    w.watch.issued(collective(seq), work, milliseconds(60000));
    work->finish();
  }
  const uint64_t stuck_seq = 3 * StallWatch::kTracked;
  WorkPtr stuck = op(stuck_seq);
  w.watch.issued(collective(stuck_seq), stuck, milliseconds(200));
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!w.failure.failed() && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  ASSERT_TRUE(w.failure.failed()) << "the watch lost the unfinished op";
  const FailureRecord r = *w.failure.first();
  EXPECT_EQ(r.kind, FailureRecord::Kind::kTimeout);
  EXPECT_EQ(r.seq, static_cast<int64_t>(stuck_seq));
  stuck->finish();
}

}  // namespace
}  // namespace distcomm
