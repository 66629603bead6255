// The stall watch's ring of recent ops (api/diagnostics/stall_watch.h): what it keeps of an
// op once the op has finished, and that an unfinished op stays watched to its deadline. One
// rank over an in-memory store: the ring does not depend on the group's size. And its
// explainer over a store that stops answering.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "api/diagnostics/group_failure.h"
#include "api/diagnostics/progress_report.h"
#include "api/diagnostics/stall_watch.h"
#include "api/errors.h"
#include "api/store/hash_store.h"
#include "api/store/tcp_store.h"
#include "tests/testing/captured_stderr.h"
#include "tests/testing/forked_store_server.h"
#include "tests/testing/forwarding_store.h"

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

// Whether `f` has failed by `limit` (a departure is seen within a few 100 ms ticks).
bool failed_within(const GroupFailure& f, milliseconds limit) {
  const auto start = std::chrono::steady_clock::now();
  while (!f.failed() && std::chrono::steady_clock::now() - start < limit) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  return f.failed();
}

// Rank 0's watch of a group of `size` over `board`.
StallWatchOptions watch_options(StorePtr board, int size, milliseconds tick) {
  StallWatchOptions o;
  o.rank = 0;
  o.size = size;
  o.board = std::move(board);
  o.tick = tick;
  return o;
}

struct Watched {
  StorePtr store = std::make_shared<HashStore>();
  GroupFailure failure{0, store};
  StallWatch watch;
  explicit Watched(milliseconds tick = milliseconds(500)) : watch(options(store, tick), failure) {}
  ~Watched() { watch.stop(); }
  static StallWatchOptions options(StorePtr store, milliseconds tick) { return watch_options(std::move(store), 1, tick); }
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

// A subgroup's "has waited" line names the others by the subgroup's numbers ("rank 1 did
// not report"): it adds which world ranks those are.
TEST(StallWatchReport, ASubgroupsHasWaitedLineMapsItsRanksToWorldRanks) {
  ::setenv("DISTCOMM_STALL_REPORT_SECONDS", "0.3", 1);  // read by the watch's constructor
  testing::CapturedStderr err;
  {
    StorePtr store = std::make_shared<HashStore>();
    GroupFailure failure{0, store};
    failure.set_world_ranks({4, 6});
    StallWatch watch(watch_options(store, 2, milliseconds(100)), failure);  // rank 1 never reports
    WorkPtr waiting = op(0);
    watch.issued(collective(0), waiting, milliseconds(600000));
    // 0.3 s, then the answer window (0.6 s); the line is dropped if the op ends first, so
    // the op waits well past that on a loaded machine.
    std::this_thread::sleep_for(milliseconds(4000));
    waiting->finish();
    watch.stop();
  }
  ::unsetenv("DISTCOMM_STALL_REPORT_SECONDS");
  const std::string text = err.text();
  EXPECT_NE(text.find("has waited"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 1 did not report"), std::string::npos) << text;
  EXPECT_NE(text.find("; group 'world' ranks [0, 1] are world ranks [4, 6]"), std::string::npos) << text;
}

// Once the watch has stopped (the group closed here), every report this rank publishes says
// it left: an explainer still asking then (one given up on, whose store answers late) must
// not overwrite leave()'s last word with a report that shows the rank present.
TEST(StallWatchReport, AReportAfterTheWatchStoppedSaysTheRankLeft) {
  StorePtr store = std::make_shared<HashStore>();
  GroupFailure failure{0, store};
  StallWatch watch(watch_options(store, 1, milliseconds(50)), failure);
  WorkPtr running = op(0);
  watch.issued(collective(0), running, milliseconds(600000));
  watch.stop();
  watch.explain(*running, std::make_exception_ptr(Timeout("late")));  // asks, and publishes its report
  const std::optional<ProgressReport> last = ProgressReport::decode(store->get_string("watch/report/0"));
  ASSERT_TRUE(last);
  EXPECT_TRUE(last->left) << "a report published after the watch stopped shows the rank present";
  running->finish();
}

// A failure is recorded on whatever thread found it: for shm, the thread that polls, with
// the group's ops held. The explainer asks the others over the board; a board whose server
// is stopped (a frozen host, a stopped launcher) answers nothing until the store's timeout,
// here a minute. The Timeout must still be recorded, unexplained, within the explainer's
// answer window plus a margin, not after the store's timeout.
TEST(StallWatchExplainer, AStoreThatStopsAnsweringDoesNotHoldTheRecordingThread) {
  testing::ForkedStoreServer server;
  StorePtr board = server.client(milliseconds(60000));
  GroupFailure failure{0, board};
  StallWatch watch(watch_options(board, 2, milliseconds(200)), failure);  // rank 1 never reports
  WorkPtr stuck = op(0);
  watch.issued(collective(0), stuck, milliseconds(600000));
  server.stop();
  const auto start = std::chrono::steady_clock::now();
  const std::exception_ptr recorded = failure.record(std::make_exception_ptr(Timeout("the op's own timeout")), *stuck);
  const int64_t took_ms =
      std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start).count();
  // The explainer's window (0.2 s tick + 0.5 s + 3 s) and the board's publish (3 s).
  EXPECT_LT(took_ms, 12000) << "the recording thread waited for the stopped store";
  ASSERT_TRUE(failure.failed());
  EXPECT_EQ(failure.first()->kind, FailureRecord::Kind::kTimeout);
  EXPECT_NE(message_of(recorded).find("the op's own timeout"), std::string::npos) << message_of(recorded);
  stuck->finish();
  const auto stopping = std::chrono::steady_clock::now();
  watch.stop();  // its thread is in a store call too: stop() leaves it after its own wait
  EXPECT_LT(std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - stopping).count(), 10000);
  server.kill();  // the abandoned calls fail now and their threads end
}

// The board's server stops answering (its process stopped, a frozen host): each of the
// watch's looks at the board then ends within its limit (two answer windows and 10 s), not at
// the store's timeout (here two minutes), so the watch goes on doing what needs no board.
// (The group's failure keeps its record elsewhere here: its own board calls are bounded
// already, and would close the shared connection after their 3 s, hiding the watch's.)

// An op past its deadline still fails within seconds of it: the watch is what fails an op
// that never started (queued behind another), so its deadline must not wait for the store.
TEST(StallWatchBoard, AStoppedBoardDoesNotDelayALateOpsTimeout) {
  testing::ForkedStoreServer server;
  StorePtr board = server.client(milliseconds(120000));
  GroupFailure failure{0, std::make_shared<HashStore>()};
  StallWatch watch(watch_options(board, 2, milliseconds(200)), failure);
  server.stop();
  WorkPtr stuck = op(0);
  const auto start = std::chrono::steady_clock::now();
  watch.issued(collective(0), stuck, milliseconds(1000));
  while (!failure.failed() && std::chrono::steady_clock::now() - start < milliseconds(60000)) {
    std::this_thread::sleep_for(milliseconds(50));
  }
  const int64_t took_ms =
      std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start).count();
  // The deadline (1 s), a look in progress (11.4 s), the explainer's window (3.7 s), and
  // room for a loaded machine.
  EXPECT_LT(took_ms, 40000) << "the late op waited for the stopped store";
  ASSERT_TRUE(failure.failed());
  EXPECT_EQ(failure.first()->kind, FailureRecord::Kind::kTimeout);
  stuck->finish();
  watch.stop();
  server.kill();
}

// The board's server is stopped for a while (a debugger on rank 0): a read of the group's
// failure that got no answer then must not leave the group deaf to its peers for good. Once
// the watch's look is answered again, a failure another rank publishes later still reaches
// this rank (which has no op in flight and no connection to see close).
TEST(StallWatchBoard, AFailurePublishedAfterTheBoardCameBackIsStillFollowed) {
  testing::ForkedStoreServer server;
  StorePtr board = server.client(milliseconds(60000));
  GroupFailure f0{0, board};
  StallWatch watch(watch_options(board, 2, milliseconds(100)), f0);
  server.stop();
  // The watch's next look at the failure (3 s unanswered) leaves it marked unanswered.
  std::this_thread::sleep_for(milliseconds(4500));
  server.cont();
  std::this_thread::sleep_for(milliseconds(1500));  // the watch's looks are answered again
  ASSERT_FALSE(f0.failed());
  GroupFailure f1{1, server.client(milliseconds(60000))};
  f1.record(std::make_exception_ptr(PeerFailure("rank 1's test failure")), "the group (no op in flight)");
  EXPECT_TRUE(failed_within(f0, milliseconds(15000))) << "rank 0 never read the board again";
  watch.stop();
  server.kill();
}

// The "has waited" line still comes, saying that nobody could be asked and, plainly, why.
TEST(StallWatchBoard, AStoppedBoardStillSaysHasWaited) {
  ::setenv("DISTCOMM_STALL_REPORT_SECONDS", "0.5", 1);  // read by the watch's constructor
  testing::ForkedStoreServer server;
  StorePtr board = server.client(milliseconds(120000));
  std::string text;
  {
    testing::CapturedStderr err;
    GroupFailure failure{0, std::make_shared<HashStore>()};
    StallWatch watch(watch_options(board, 2, milliseconds(200)), failure);
    server.stop();
    WorkPtr waiting = op(0);
    watch.issued(collective(0), waiting, milliseconds(600000));
    // The first look at the board ends at its limit (11.4 s); the line comes right after.
    std::this_thread::sleep_for(milliseconds(20000));
    waiting->finish();
    watch.stop();
    text = err.text();
  }
  ::unsetenv("DISTCOMM_STALL_REPORT_SECONDS");
  server.kill();
  EXPECT_NE(text.find("all_reduce #0 has waited"), std::string::npos) << text;
  EXPECT_NE(text.find("the others could not be asked (the store's server did not answer (its process stopped, its "
                      "host froze, or the network between this host and it is down): TCPStore:"),
            std::string::npos)
      << text;
}

// Every request a watch makes of its board, counted.
class CountingStore : public testing::ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  using Store::set;
  void set(const std::string& key, const Bytes& value) override { ++calls; ForwardingStore::set(key, value); }
  Bytes get(const std::string& key) override { ++calls; return ForwardingStore::get(key); }
  int64_t add(const std::string& key, int64_t delta) override { ++calls; return ForwardingStore::add(key, delta); }
  bool check(const std::vector<std::string>& keys) override { ++calls; return ForwardingStore::check(keys); }
  std::atomic<int64_t> calls{0};
};

// Ops with a short timeout (under ~450 ms: their deadline comes before the watch's next
// tick) that finish at once wake the watch at their issue, so that it can plan for their
// deadline; that wake must only plan, not look at the board. Looking at each one's issue made
// a store request per op per rank (80 ops here: 160 requests and more, where the watch's
// only planned look in that time is none: its tick is 2 s).
TEST(StallWatchWake, QuickOpsWithShortTimeoutsCostNoLookAtTheBoard) {
  auto board = std::make_shared<CountingStore>(std::make_shared<HashStore>());
  GroupFailure failure{0, std::make_shared<HashStore>()};
  StallWatch watch(watch_options(board, 1, milliseconds(2000)), failure);
  std::this_thread::sleep_for(milliseconds(100));  // the watch's thread is asleep till its tick
  const int64_t before = board->calls.load();
  const auto start = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < 80; ++i) {
    WorkPtr quick = op(i);
    watch.issued(collective(i), quick, milliseconds(200));
    quick->finish();
    std::this_thread::sleep_for(milliseconds(10));
  }
  const int64_t calls = board->calls.load() - before;
  const auto took = std::chrono::steady_clock::now() - start;
  watch.stop();
  if (took < milliseconds(1800)) {  // else the tick came meanwhile (a loaded machine): one look
    EXPECT_EQ(calls, 0) << "the board was asked at the issue of quick ops";
  } else {
    EXPECT_LT(calls, 10) << "the board was asked at the issue of quick ops";
  }
  EXPECT_FALSE(failure.failed());
}

// Two ranks' watches over one board; rank 1 closes its group (its watch stops) while rank 0
// waits in broadcast #1, whose root is rank 1 (done once it has sent).
struct TwoRanks {
  StorePtr board = std::make_shared<HashStore>();
  GroupFailure f0{0, board}, f1{1, board};
  StallWatch w0{options(0), f0}, w1{options(1), f1};
  StallWatchOptions options(int rank) {
    StallWatchOptions o = watch_options(board, 2, milliseconds(100));
    o.rank = rank;
    return o;
  }
  ~TwoRanks() {
    w0.stop();
    w1.stop();
  }
};

// More point-to-point ops than the ring holds, each finished.
void run_many_sends(StallWatch& w) {
  for (uint64_t i = 0; i < StallWatch::kTracked + 44; ++i) {
    OpFingerprint send;
    send.op = OpType::kSend;
    send.p2p = true;
    send.seq = i;
    send.root = 0;
    WorkPtr work = std::make_shared<Work>(OpType::kSend, i, "send");
    w.issued(send, work, milliseconds(600000));
    work->finish();
  }
}

OpFingerprint broadcast_from_1(uint64_t seq) {
  OpFingerprint f;
  f.op = OpType::kBroadcast;
  f.seq = seq;
  f.root = 1;
  return f;
}

// Rank 1 finished broadcast #1 and then ran more point-to-point ops than the ring holds:
// its departure is no failure of rank 0's #1, which rank 1 did issue (a review's
// reproduction: "rank 1 left ... before any collective, without issuing #1").
TEST(StallWatchDeparture, ManyP2pOpsAfterTheLastCollectiveDoNotHideIt) {
  TwoRanks t;
  WorkPtr mine = op(1);
  t.w0.issued(broadcast_from_1(1), mine, milliseconds(600000));
  WorkPtr theirs = op(1);
  t.w1.issued(broadcast_from_1(1), theirs, milliseconds(600000));
  theirs->finish();
  run_many_sends(t.w1);
  t.w1.stop();
  std::this_thread::sleep_for(milliseconds(1500));
  EXPECT_FALSE(t.f0.failed()) << t.f0.first()->message;
  mine->finish();
}

// And a rank that left without issuing the collective another waits in is named within a
// few ticks, not at the op's timeout, however many point-to-point ops it ran after its last
// collective (its report shows that collective).
TEST(StallWatchDeparture, ARankThatLeftWithoutIssuingTheCollectiveIsNamed) {
  TwoRanks t;
  WorkPtr theirs = op(0);
  t.w1.issued(broadcast_from_1(0), theirs, milliseconds(600000));
  theirs->finish();
  run_many_sends(t.w1);
  WorkPtr mine0 = op(0);
  t.w0.issued(broadcast_from_1(0), mine0, milliseconds(600000));
  mine0->finish();
  WorkPtr mine = op(1);
  t.w0.issued(broadcast_from_1(1), mine, milliseconds(600000));
  t.w1.stop();
  ASSERT_TRUE(failed_within(t.f0, milliseconds(10000)));
  const std::string message = t.f0.first()->message;
  EXPECT_NE(message.find("rank 1 left the group"), std::string::npos) << message;
  EXPECT_NE(message.find("without issuing #1"), std::string::npos) << message;
  mine->finish();
}

// A rank that closed its group before its first collective (only point-to-point ops, or
// none) is named too: its report shows no collective, which now means it issued none (a
// review found such a departure not judged, costing the peer in #0 the op's timeout).
TEST(StallWatchDeparture, ARankThatLeftBeforeAnyCollectiveIsNamed) {
  TwoRanks t;
  run_many_sends(t.w1);
  WorkPtr mine = op(0);
  t.w0.issued(broadcast_from_1(0), mine, milliseconds(600000));
  t.w1.stop();
  ASSERT_TRUE(failed_within(t.f0, milliseconds(10000)));
  const std::string message = t.f0.first()->message;
  EXPECT_NE(message.find("rank 1 left the group (closed it on its side) without issuing #0 (it issued no collective "
                         "on this backend)"),
            std::string::npos)
      << message;
  mine->finish();
}

}  // namespace
}  // namespace distcomm
