// Polling without a latency floor: a wait re-checks at once for its first microseconds,
// then yields, and sleeps (doubling, capped) only once the wait has lasted; deadlines and
// aborts end it.
#include "backends/nccl/polling.h"

#include <gtest/gtest.h>

#include <thread>

namespace distcomm {
namespace nccl {
namespace {

using namespace std::chrono_literals;
using Step = Backoff::Step;
using Clock = std::chrono::steady_clock;

TEST(BackoffTest, SpinsThenYieldsThenSleepsDoublingUpToTheCap) {
  Backoff b(std::chrono::microseconds(100));
  EXPECT_EQ(b.next(0us).kind, Step::kSpin);
  EXPECT_EQ(b.next(Backoff::kSpinFor - 1us).kind, Step::kSpin);
  EXPECT_EQ(b.next(Backoff::kSpinFor).kind, Step::kYield);
  EXPECT_EQ(b.next(Backoff::kYieldUntil - 1us).kind, Step::kYield);
  std::vector<long> sleeps;
  for (int i = 0; i < 6; ++i) {
    const Step s = b.next(Backoff::kYieldUntil + std::chrono::microseconds(i));
    ASSERT_EQ(s.kind, Step::kSleep);
    sleeps.push_back(static_cast<long>(s.sleep.count()));
  }
  EXPECT_EQ(sleeps, (std::vector<long>{10, 20, 40, 80, 100, 100}));
}

TEST(PollUntilTest, ReturnsAsSoonAsDoneWithoutSleepingFirst) {
  int calls = 0;
  const auto start = Clock::now();
  EXPECT_EQ(poll_until([&] { return ++calls == 3; }, Clock::now() + 10s), Waited::kDone);
  EXPECT_EQ(calls, 3);
  EXPECT_LT(Clock::now() - start, 5ms) << "three checks in a row slept";
}

TEST(PollUntilTest, ChecksAtLeastOnceAndTimesOutNotBeforeTheDeadline) {
  int calls = 0;
  EXPECT_EQ(poll_until([&] { return ++calls > 0; }, Clock::now() - 1s), Waited::kDone);
  const auto start = Clock::now();
  EXPECT_EQ(poll_until([] { return false; }, start + 30ms), Waited::kTimedOut);
  EXPECT_GE(Clock::now() - start, 30ms);
  EXPECT_LT(Clock::now() - start, 2s);
}

TEST(PollUntilTest, AnAbortFromAnotherThreadEndsTheWait) {
  std::atomic<bool> aborted{false};
  const auto start = Clock::now();  // before the thread: its 20 ms sleep starts after this
  std::thread aborter([&] {
    std::this_thread::sleep_for(20ms);
    aborted = true;
  });
  EXPECT_EQ(poll_until([] { return false; }, Clock::time_point::max(), &aborted), Waited::kAborted);
  EXPECT_GE(Clock::now() - start, 20ms);
  EXPECT_LT(Clock::now() - start, 2s);
  aborter.join();
}

TEST(DeadlineAfterTest, ZeroOrLessMeansNone) {
  EXPECT_EQ(deadline_after(0ms), Clock::time_point::max());
  EXPECT_EQ(deadline_after(-1ms), Clock::time_point::max());
  const auto before = Clock::now();
  const auto d = deadline_after(100ms);
  EXPECT_GE(d, before + 100ms);
  EXPECT_LE(d, Clock::now() + 100ms);
}

}  // namespace
}  // namespace nccl
}  // namespace distcomm
