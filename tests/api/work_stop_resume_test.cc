// The core's safety net (Work::arm_core_deadline) across a process stop. The steady clock
// keeps counting while a process is stopped (SIGSTOP, a frozen container, a debugger), so
// a waiter resumed past the op's timeout and the core's grace used to end the op at once,
// before the backend's own threads -- resumed at the same instant -- could see that the
// peers failed the group meanwhile and end the op with that failure. The net now gives the
// backend the grace again from the resume; a backend truly stuck is still ended by it.
//
// A Work armed as ProcessGroup::call_backend arms every backend's, and a thread standing for
// a backend that does not run its ops on the waiter (nccl's watchdog, mpi's thread, shm's
// progress thread, hier's scheduler): it notices the resume by a late tick, as such a
// thread's own loop would, and ends the op a moment later.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "api/diagnostics/core_net_for_tests.h"
#include "api/errors.h"
#include "api/work.h"
#include "tests/testing/stop_self.h"

namespace distcomm {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr auto kTimeout = 200ms;
constexpr auto kFloor = 1s;  // the grace: max(1 s, 20 ms)
constexpr int kStoppedMs = 5000;  // past the op's timeout and grace, and a late wake (2 s)

// Lowers the grace's floor for one test (at 10 s each stop would last over 12 s).
class WorkStopResume : public ::testing::Test {
 protected:
  void SetUp() override { previous_ = internal::set_core_grace_floor_for_tests(kFloor); }
  void TearDown() override { internal::set_core_grace_floor_for_tests(previous_); }

 private:
  std::chrono::milliseconds previous_{};
};

std::shared_ptr<Work> armed_op() {
  auto work = std::make_shared<Work>(OpType::kAllReduce, 0, "rank 1/2 group 'world' all_reduce #0");
  work->arm_core_deadline(kTimeout, Work::intern_backend_name("resumed"));
  return work;
}

// Stops this process after `after_ms` for `for_ms`; returns the child that resumes it.
pid_t stop_self(int after_ms, int for_ms) {
  return testing::stop_self_after(std::chrono::milliseconds(after_ms), std::chrono::milliseconds(for_ms));
}

std::string error_of(Work& work, std::chrono::milliseconds timeout = kUseDefault) {
  try {
    work.wait(timeout);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The backend's thread: ticks every 50 ms; a tick more than a second late is the resume,
// after which it takes `after_resume` to learn the group's failure and end the op with it.
std::thread backend_thread(std::shared_ptr<Work> work, std::chrono::milliseconds after_resume) {
  return std::thread([work, after_resume] {
    auto asked = Clock::now();
    while (!work->is_completed()) {
      const auto now = Clock::now();
      if (now - asked > 1s) {
        std::this_thread::sleep_for(after_resume);
        work->finish(std::make_exception_ptr(
            Timeout("rank 0 of the group timed out and aborted the group; its error: all_reduce #0 timed out")));
        return;
      }
      asked = now + 50ms;
      std::this_thread::sleep_until(asked);
    }
  });
}

TEST_F(WorkStopResume, AWaiterResumedPastTheGraceLetsTheBackendEndTheOpWithItsError) {
  auto work = armed_op();
  std::thread backend = backend_thread(work, 300ms);
  const pid_t resumer = stop_self(50, kStoppedMs);
  const std::string message = error_of(*work);
  ::waitpid(resumer, nullptr, 0);
  backend.join();
  EXPECT_EQ(message.find("the core ended it"), std::string::npos) << message;
  EXPECT_NE(message.find("rank 0 of the group timed out and aborted the group"), std::string::npos) << message;
}

TEST_F(WorkStopResume, AWaitWithATimeoutLongerThanTheNetAlsoGivesTheGraceAgain) {
  auto work = armed_op();
  std::thread backend = backend_thread(work, 300ms);
  const pid_t resumer = stop_self(50, kStoppedMs);
  const std::string message = error_of(*work, 60s);
  ::waitpid(resumer, nullptr, 0);
  backend.join();
  EXPECT_NE(message.find("aborted the group"), std::string::npos) << message;
}

// The stop came before the wait: the program was busy elsewhere when it stopped, and waits
// on the op as soon as it runs again, past the net, with the backend's thread resumed at
// the same instant.
TEST_F(WorkStopResume, AWaitBegunPastTheNetAfterAStopLetsTheBackendEndTheOp) {
  auto work = armed_op();
  std::thread backend = backend_thread(work, 300ms);
  const pid_t resumer = stop_self(50, kStoppedMs);
  std::this_thread::sleep_for(500ms);  // the program's own work, which the stop lengthens
  ASSERT_FALSE(work->is_completed());
  const std::string message = error_of(*work);
  ::waitpid(resumer, nullptr, 0);
  backend.join();
  EXPECT_NE(message.find("aborted the group"), std::string::npos) << message;
}

TEST_F(WorkStopResume, AStuckBackendIsStillEndedAGraceAfterTheResume) {
  auto work = armed_op();  // nothing ends it
  const pid_t resumer = stop_self(50, kStoppedMs);
  const auto start = Clock::now();
  const std::string message = error_of(*work);
  const auto took = Clock::now() - start;
  ::waitpid(resumer, nullptr, 0);
  EXPECT_NE(message.find("backend 'resumed' did not end the op within its timeout (200 ms)"), std::string::npos)
      << message;
  EXPECT_NE(message.find("the core ended it"), std::string::npos) << message;
  // The stop (5 s), then the grace (1 s) from the resume: not at once, not for ever.
  EXPECT_GE(took, std::chrono::milliseconds(kStoppedMs) + kFloor - 100ms);
  EXPECT_LT(took, std::chrono::milliseconds(kStoppedMs) + kFloor + 2s);
}

TEST_F(WorkStopResume, WithoutAStopTheNetEndsAStuckOpAtItsTimeoutAndGrace) {
  auto work = armed_op();
  const auto start = Clock::now();
  // The caller's own timeout, shorter than the net, is the caller's Timeout; the op goes on.
  const std::string early = error_of(*work, 50ms);
  EXPECT_NE(early.find("Work::wait timeout"), std::string::npos) << early;
  EXPECT_FALSE(work->is_completed());
  const std::string message = error_of(*work);
  const auto took = Clock::now() - start;
  EXPECT_NE(message.find("the core ended it"), std::string::npos) << message;
  EXPECT_GE(took, kTimeout + kFloor - 50ms);
  EXPECT_LT(took, kTimeout + kFloor + 1s);
}

// A program that polls a stuck op with short waits, the first begun past the net (it was
// busy, or stopped, meanwhile): that first wait may be a resume and gives the grace once;
// the later ones begin past the net too, but each renewing the grace kept the op alive for
// ever (helper-215's review of 96630b7).
TEST_F(WorkStopResume, ShortWaitsBegunPastTheNetRenewTheGraceOnlyOnce) {
  auto work = armed_op();  // nothing ends it
  const auto start = Clock::now();
  std::this_thread::sleep_for(kTimeout + kFloor + 100ms);  // past the net, no wait meanwhile
  std::string message;
  int polls = 0;
  while (Clock::now() - start < 10s) {
    message = error_of(*work, 100ms);
    ++polls;
    if (message.find("Work::wait timeout") == std::string::npos) break;
  }
  const auto took = Clock::now() - start;
  EXPECT_NE(message.find("the core ended it"), std::string::npos) << message << " (after " << polls << " waits)";
  // Past the net at 1.3 s, then one grace (1 s) from the first wait.
  EXPECT_LT(took, kTimeout + 2 * kFloor + 100ms + 1s) << polls << " waits";
}

TEST_F(WorkStopResume, TheFloorIsTheGracesFloor) {
  EXPECT_EQ(core_timeout_grace(kTimeout), kFloor);
  EXPECT_EQ(core_timeout_grace(100s), 10s);  // 10% of a long timeout
}

}  // namespace
}  // namespace distcomm
