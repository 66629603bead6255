// A Timeout's words quote the others' answers to the explanation's own ask, not their answers
// to the op's early ask (stall_watch_answers.h). Three ranks' watches over one in-memory
// board; rank 0 issues all_reduce #1 with a timeout short enough for an early ask (3 s
// against a 2 s tick: asked at 1.5-2 s), and rank 1 issues #1 only after it has answered that
// early ask, before rank 0's deadline. The explanation once took the early answers as soon as
// every rank had given one, and said "ranks [1, 2] have not issued #1 yet" of rank 1, then in
// #1 for over a second.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <regex>
#include <string>
#include <thread>

#include "api/diagnostics/group_failure.h"
#include "api/diagnostics/progress_report.h"
#include "api/diagnostics/stall_watch.h"
#include "api/errors.h"
#include "api/store/hash_store.h"
#include "tests/testing/forwarding_store.h"

namespace distcomm {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// Rank 0's op: asked early at half its timeout, or the watch's next tick after its issue
// (issued() wakes the watch only for a deadline before that tick), and failed at 3.2 s.
constexpr milliseconds kTimeout{3000};
// Rank 0's watch: its tick makes the early ask (a first probe at 1.5 s leaves less than a
// tick and half a second before the deadline), and puts the second probe (a tick after the
// first, 3.5 s or later) past the Timeout: its fresh answers would hide what the early ones say.
constexpr milliseconds kTick0{2000};
constexpr milliseconds kTick{100};      // ranks 1 and 2 answer within about this

OpFingerprint all_reduce(uint64_t seq) {
  OpFingerprint f;
  f.op = OpType::kAllReduce;
  f.seq = seq;
  return f;
}

WorkPtr op(int rank, uint64_t seq) {
  return std::make_shared<Work>(OpType::kAllReduce, seq,
                                "rank " + std::to_string(rank) + "/3 group 'world' all_reduce #" + std::to_string(seq));
}

// A rank's view of the board that stops answering on demand, as a stopped process's would:
// its watch then answers no later ask (its calls fail, and the watch carries on).
class FreezableStore : public testing::ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  using Store::set;
  void set(const std::string& key, const Bytes& value) override { check_live(); ForwardingStore::set(key, value); }
  Bytes get(const std::string& key) override { check_live(); return ForwardingStore::get(key); }
  int64_t add(const std::string& key, int64_t delta) override { check_live(); return ForwardingStore::add(key, delta); }
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    check_live();
    return ForwardingStore::compare_set(key, expected, desired);
  }
  bool check(const std::vector<std::string>& keys) override { check_live(); return ForwardingStore::check(keys); }
  void wait(const std::vector<std::string>& keys, milliseconds timeout) override {
    check_live();
    ForwardingStore::wait(keys, timeout);
  }
  std::atomic<bool> frozen{false};

 private:
  void check_live() const {
    if (frozen) throw StoreError("the test froze this rank's board");
  }
};

struct ThreeRanks {
  StorePtr board = std::make_shared<HashStore>();
  std::shared_ptr<FreezableStore> board1 = std::make_shared<FreezableStore>(board);
  // Ranks 1 and 2 keep their failures apart: only rank 0's Timeout is under test.
  GroupFailure f0{0, board}, f1{1, std::make_shared<HashStore>()}, f2{2, std::make_shared<HashStore>()};
  StallWatch w0{options(0, board, kTick0), f0};
  StallWatch w1{options(1, board1, kTick), f1};
  StallWatch w2{options(2, board, kTick), f2};
  std::vector<WorkPtr> works;

  static StallWatchOptions options(int rank, StorePtr store, milliseconds tick) {
    StallWatchOptions o;
    o.rank = rank;
    o.size = 3;
    o.board = std::move(store);
    o.tick = tick;
    return o;
  }
  ~ThreeRanks() {
    for (const WorkPtr& w : works) {
      if (!w->is_completed()) w->finish();
    }
    w0.stop();
    w1.stop();
    w2.stop();
  }
  // Every rank ran all_reduce #0 to the end: "its last collective: all_reduce #0, finished".
  void first_collective_done() {
    StallWatch* watches[] = {&w0, &w1, &w2};
    for (int r = 0; r < 3; ++r) {
      WorkPtr w = op(r, 0);
      watches[r]->issued(all_reduce(0), w, milliseconds(600000));
      w->finish();
    }
  }
  WorkPtr issue(StallWatch& w, int rank, milliseconds timeout) {
    works.push_back(op(rank, 1));
    w.issued(all_reduce(1), works.back(), timeout);
    return works.back();
  }
  // Waits until rank 1 has answered rank 0's early ask (the board's first request: nothing
  // else asks before it), false if it has not by `limit`.
  bool rank_1_answered_the_early_ask(milliseconds limit) {
    const auto until = Clock::now() + limit;
    while (Clock::now() < until) {
      if (board->check({"watch/request", "watch/report/1"})) {
        const int64_t asked = board->add("watch/request", 0);
        const std::optional<ProgressReport> r = ProgressReport::decode(board->get_string("watch/report/1"));
        if (asked > 0 && r && r->request >= asked) return true;
      }
      std::this_thread::sleep_for(milliseconds(10));
    }
    return false;
  }
  std::string rank_0_error(milliseconds limit) {
    const auto until = Clock::now() + limit;
    while (!f0.failed() && Clock::now() < until) std::this_thread::sleep_for(milliseconds(20));
    const std::string message = f0.failed() ? f0.first()->message : "";
    std::fprintf(stderr, "rank 0's error: %s\n", message.c_str());  // what a user reads, in the test's log
    return message;
  }
};

// Rank 1 issues #1 after its early answer and answers the Timeout's ask: the words say where
// it is now, and name rank 2 alone as not having issued #1.
TEST(StallWatchEarlyAnswer, ARankThatIssuedTheOpSinceItsEarlyAnswerIsNotSaidToHaveNot) {
  ThreeRanks t;
  t.first_collective_done();
  const auto start = Clock::now();
  t.issue(t.w0, 0, kTimeout);
  ASSERT_TRUE(t.rank_1_answered_the_early_ask(milliseconds(10000))) << "rank 0 never asked early";
  ASSERT_FALSE(t.f0.failed()) << "the machine is too slow for this test: rank 0 failed before rank 1 could issue #1";
  t.issue(t.w1, 1, milliseconds(600000));
  const double issued_s = std::chrono::duration<double>(Clock::now() - start).count();
  const std::string message = t.rank_0_error(milliseconds(15000));
  ASSERT_FALSE(message.empty()) << "rank 0's #1 never timed out";
  EXPECT_EQ(t.f0.first()->kind, FailureRecord::Kind::kTimeout) << message;
  EXPECT_NE(message.find("rank 1 waits in it too"), std::string::npos)
      << "rank 1 issued #1 " << issued_s << " s after rank 0 did, before its deadline: " << message;
  EXPECT_NE(message.find("rank 2 has not issued #1 yet"), std::string::npos) << message;
  EXPECT_EQ(message.find("ranks [1, 2] have not issued"), std::string::npos) << message;
  EXPECT_EQ(message.find("answered this rank's ask of"), std::string::npos)
      << "every rank answered the Timeout's own ask: " << message;
}

// Rank 1 issues #1 after its early answer, and then answers nothing more (its board frozen, as
// a stopped process's): its early answer stands in, and the words say that it is that and
// from when, rather than that rank 1 has not issued #1 now.
TEST(StallWatchEarlyAnswer, AnEarlyAnswerThatStandsInIsSaidToBeOne) {
  ThreeRanks t;
  t.first_collective_done();
  t.issue(t.w2, 2, milliseconds(600000));  // rank 2 waits in #1 from the start
  t.issue(t.w0, 0, kTimeout);
  ASSERT_TRUE(t.rank_1_answered_the_early_ask(milliseconds(10000))) << "rank 0 never asked early";
  t.board1->frozen = true;
  ASSERT_FALSE(t.f0.failed()) << "the machine is too slow for this test: rank 0 failed before rank 1 could issue #1";
  t.issue(t.w1, 1, milliseconds(600000));
  const std::string message = t.rank_0_error(milliseconds(15000));
  ASSERT_FALSE(message.empty()) << "rank 0's #1 never timed out";
  EXPECT_NE(message.find("rank 2 waits in it too"), std::string::npos) << message;
  // Its early answer, "has not issued #1 yet", said as of the ask of 1-1.5 s before the deadline.
  EXPECT_NE(message.find("rank 1 has not issued #1 yet"), std::string::npos) << message;
  EXPECT_TRUE(std::regex_search(message, std::regex("; rank 1 answered this rank's ask of [0-9.]+ s before the op's "
                                                     "deadline, not the ask of its Timeout: its word above is from then")))
      << message;
}

}  // namespace
}  // namespace distcomm
