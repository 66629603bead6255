// Aborting communicators when one abort waits for another (concurrent_abort.h), with CPU
// stand-ins: a group communicator whose ncclCommAbort waits for its stream, where its
// kernel is queued behind a pair communicator's stuck send that only the pair's abort
// frees (`send(x)->wait(); all_reduce(y)` with the peer dead). Aborted one after the other,
// group first (the registry's order), that is a hang; these tests fail with it.
#include "backends/nccl/concurrent_abort.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "tests/backends/nccl/fake_device.h"

namespace distcomm {
namespace nccl {
namespace testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A one-way signal with a bounded wait; shared with threads that may outlive the test body.
class Signal {
 public:
  void set() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      set_ = true;
    }
    cv_.notify_all();
  }
  // False if `limit` passed first.
  bool wait_for(std::chrono::milliseconds limit) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, limit, [&] { return set_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool set_ = false;
};

// What the fakes saw: the order in which the aborts began, and whether the group's abort
// gave up waiting for the pair's.
struct Seen {
  std::mutex mu;
  std::vector<std::string> began;
  std::atomic<bool> group_abort_gave_up{false};
  std::atomic<bool> group_abort_returned{false};
  Signal pair_aborted;
};

// The group's abort returns only once the pair's has been called (or, so that a broken
// order fails the test instead of hanging it, after `cap`).
struct Comms {
  std::shared_ptr<FakeComm> group = std::make_shared<FakeComm>("NCCL communicator #0 of group 'world' on cuda:0");
  std::shared_ptr<FakeComm> pair = std::make_shared<FakeComm>("NCCL communicator of ranks 0 and 1 of group 'world'");
  std::shared_ptr<Seen> seen = std::make_shared<Seen>();

  explicit Comms(std::chrono::milliseconds cap = 5000ms) {
    auto s = seen;
    pair->on_abort = [s] {
      {
        std::lock_guard<std::mutex> lock(s->mu);
        s->began.push_back("pair");
      }
      s->pair_aborted.set();
    };
    group->on_abort = [s, cap] {
      {
        std::lock_guard<std::mutex> lock(s->mu);
        s->began.push_back("group");
      }
      if (!s->pair_aborted.wait_for(cap)) s->group_abort_gave_up = true;
      s->group_abort_returned = true;
    };
  }
  std::vector<std::string> began() {
    std::lock_guard<std::mutex> lock(seen->mu);
    return seen->began;
  }
};

TEST(ConcurrentAbortTest, AnAbortWaitingForAnotherEndsWhenTheFailingOneIsFirst) {
  Comms c;
  const auto start = Clock::now();
  const auto left = abort_concurrently(std::vector<std::shared_ptr<FakeComm>>{c.pair, c.group}, "peer died", 3000ms);
  EXPECT_TRUE(left.empty());
  EXPECT_LT(Clock::now() - start, 2s);
  EXPECT_EQ(c.began(), (std::vector<std::string>{"pair", "group"})) << "the failing communicator is aborted first";
  EXPECT_FALSE(c.seen->group_abort_gave_up);
  EXPECT_EQ(c.group->abort_reason(), "peer died");
}

// The failing one is the group's (its all_reduce timed out first) and its abort is the one
// that waits: after the head start the others start anyway.
TEST(ConcurrentAbortTest, AFirstAbortThatWaitsForAnotherDoesNotHoldTheOthersBack) {
  Comms c;
  const auto start = Clock::now();
  const auto left = abort_concurrently(std::vector<std::shared_ptr<FakeComm>>{c.group, c.pair}, "timeout", 3000ms);
  EXPECT_TRUE(left.empty());
  EXPECT_FALSE(c.seen->group_abort_gave_up) << "the aborts ran one after the other";
  EXPECT_LT(Clock::now() - start, kFirstAbortHeadStart + 1500ms);
  EXPECT_EQ(c.pair->aborts, 1);
  EXPECT_EQ(c.group->aborts, 1);
}

TEST(ConcurrentAbortTest, AnAbortThatNeverReturnsIsLeftRunningAfterTheBound) {
  auto hold = std::make_shared<Signal>();
  auto stuck = std::make_shared<FakeComm>("NCCL communicator #1 of group 'world' on cuda:0");
  auto fine = std::make_shared<FakeComm>("NCCL communicator #0 of group 'world' on cuda:0");
  stuck->on_abort = [hold] { hold->wait_for(60000ms); };
  const auto start = Clock::now();
  const auto left = abort_concurrently(std::vector<std::shared_ptr<FakeComm>>{stuck, fine, stuck, nullptr}, "x", 300ms);
  EXPECT_GE(Clock::now() - start, 300ms);
  EXPECT_LT(Clock::now() - start, 5s);
  EXPECT_EQ(left, (std::vector<std::string>{stuck->label()}));
  EXPECT_EQ(fine->aborts, 1);
  EXPECT_EQ(stuck->aborts, 1) << "a communicator listed twice is aborted once";
  hold->set();  // its thread ends; it holds what it uses
}

TEST(ConcurrentAbortTest, ATaskThatThrowsCountsAsReturned) {
  const auto left = run_concurrently({[] { throw std::runtime_error("ncclCommAbort failed"); }, [] {}}, 2000ms);
  EXPECT_TRUE(left.empty());
}

// The whole path: a send times out (its peer died) while an all_reduce on the group's
// communicator waits behind it; the watchdog records the fault, and the group's abort hook
// aborts every communicator of the backend, listed group first. Before, the hook aborted
// them in that order, inside GroupFailure::record, and the watchdog never came back.
TEST(ConcurrentAbortTest, TheWatchdogDoesNotHangWhenTheGroupsAbortWaitsForThePairs) {
  Comms c;
  auto failure = std::make_shared<GroupFailure>(0, nullptr);
  std::vector<std::shared_ptr<WatchedComm>> registry{c.group, c.pair};  // a std::map's order
  Watchdog dog(failure, 200us, [registry] { return registry; }, 3000ms);
  auto send = std::make_shared<FakeOp>("rank 0/2 group 'world' send #0");
  auto all_reduce = std::make_shared<FakeOp>("rank 0/2 group 'world' all_reduce #1");
  dog.track(c.pair, send, 100ms);
  dog.track(c.group, all_reduce, 60000ms);
  ASSERT_TRUE(eventually([&] { return send->completions() == 1 && all_reduce->completions() == 1; }, 10000ms));
  EXPECT_FALSE(c.seen->group_abort_gave_up) << "the group's abort waited for the pair's, which had not begun";
  EXPECT_TRUE(c.seen->group_abort_returned);
  EXPECT_EQ(c.began().front(), "pair") << "the failing communicator is aborted first";
  EXPECT_NE(message_of<Timeout>(send->error()).find("send #0"), std::string::npos);
  EXPECT_NE(message_of<Timeout>(all_reduce->error()).find("the group is unusable since an earlier failure"),
            std::string::npos);
}

}  // namespace
}  // namespace testing
}  // namespace nccl
}  // namespace distcomm
