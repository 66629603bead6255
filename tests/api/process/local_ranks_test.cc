// Starting and watching the ranks of a job on this machine (api/process/local_ranks.h), and
// the variables every launcher gives a rank (api/process/rank_environment.h): the library
// behind spawn(), the launcher, the benchmarks and run_ranks. Real forks, real signals.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "api/process/failure_report.h"
#include "api/process/local_ranks.h"
#include "api/process/rank_environment.h"

namespace distcomm {
namespace local {
namespace {

using Clock = LocalRanks::Clock;  // the clock its time limit and grace run on
using std::chrono::milliseconds;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

[[noreturn]] void wait_forever() {
  for (;;) ::pause();
}

// Every child was reaped: nothing is left to wait for.
void expect_no_children() {
  errno = 0;
  EXPECT_EQ(::waitpid(-1, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

RankWatchOptions policy(AfterFailure after, milliseconds grace, milliseconds limit = milliseconds(0)) {
  RankWatchOptions o;
  o.after_failure = after;
  o.grace = grace;
  o.time_limit = limit;
  return o;
}

TEST(RankEnvironment, NamesTheRankAndWhereTheJobMeets) {
  RankEnvironment e;
  e.rank = 5;
  e.world_size = 8;
  e.local_rank = 1;
  e.local_world_size = 4;
  e.master_addr = "head";
  e.master_port = 1234;
  const std::map<std::string, std::string> plain = {
      {"RANK", "5"},          {"WORLD_SIZE", "8"},   {"LOCAL_RANK", "1"},
      {"LOCAL_WORLD_SIZE", "4"}, {"MASTER_ADDR", "head"}, {"MASTER_PORT", "1234"},
  };
  EXPECT_EQ(e.variables(), plain) << "an empty identity or backend is not exported";
  e.identity = {"run", "secret"};
  e.backend = "gloo";
  std::map<std::string, std::string> full = plain;
  full["DISTCOMM_RUN_ID"] = "run";
  full["DISTCOMM_STORE_TOKEN"] = "secret";
  full["DISTCOMM_BACKEND"] = "gloo";
  EXPECT_EQ(e.variables(), full);
  e.store_served_by_launcher = true;
  full["DISTCOMM_STORE_SERVED_BY"] = "launcher";
  EXPECT_EQ(e.variables(), full) << "a launcher serving the store says so";
}

// kTerminate (spawn): the first failure stops the others at once, SIGTERM then SIGKILL.
TEST(LocalRanks, AFailureTerminatesTheOthers) {
  LocalRanks ranks(policy(AfterFailure::kTerminate, milliseconds(300)));
  int handler_set[2];
  ASSERT_EQ(::pipe(handler_set), 0);
  ranks.fork_ranks(3, [&](int rank) -> std::string {
    if (rank == 1) {
      // Once rank 2 has set its handler (a sleep here lost the race on a loaded machine:
      // rank 2 then died of the SIGTERM).
      char byte;
      if (::read(handler_set[0], &byte, 1) != 1) return "rank 2 never said it ignores SIGTERM";
      return "rank 1 gave up";
    }
    if (rank == 2) {
      ::signal(SIGTERM, SIG_IGN);  // left for SIGKILL
      if (::write(handler_set[1], "r", 1) != 1) ::_exit(9);
    }
    wait_forever();
  });
  ::close(handler_set[0]);
  ::close(handler_set[1]);
  const auto start = Clock::now();
  ranks.watch();
  EXPECT_LT(seconds_since(start), 5.0);
  EXPECT_EQ(ranks.first_seen_failure(), 1);
  EXPECT_EQ(ranks.first_failure(), 1);
  EXPECT_EQ(ranks.stop_cause(), StopCause::kFailure);
  EXPECT_EQ(ranks[1].report, "rank 1 gave up");
  EXPECT_FALSE(ranks[1].stopped);
  EXPECT_TRUE(ranks[0].stopped);
  EXPECT_EQ(describe_wait_status(ranks[0].status), "signal SIGTERM (Terminated)");
  EXPECT_EQ(describe_wait_status(ranks[2].status), "signal SIGKILL (Killed)");
  expect_no_children();
}

// In a cascade the rank that failed first by its report's time is the cause, even when
// another rank's exit was seen first.
TEST(LocalRanks, TheFirstFailureIsByReportedTime) {
  LocalRanks ranks(policy(AfterFailure::kLetEnd, milliseconds(10000)));
  ranks.fork_ranks(2, [](int rank) -> std::string {
    if (rank == 0) throw std::runtime_error("lost my peer");
    FailureReport early;
    early.unix_time_ns = FailureReport::now_ns() - 1'000'000'000;
    early.message = "the cause";
    std::this_thread::sleep_for(milliseconds(300));
    return early.encode();
  });
  ranks.watch();
  EXPECT_EQ(ranks.first_seen_failure(), 0);
  EXPECT_EQ(ranks.first_failure(), 1);
  EXPECT_EQ(how_it_failed(ranks[0]), "it threw std::runtime_error: lost my peer");
  EXPECT_EQ(ranks.stop_cause(), StopCause::kNone) << "both ended on their own within the grace";
}

// A report that says it adopted another rank's failure comes after the one that did not,
// though its time is earlier; and the report's format keeps the flag.
TEST(LocalRanks, AnAdoptedFailureIsNotTheCauseHoweverEarly) {
  FailureReport adopted;
  adopted.unix_time_ns = 42;
  adopted.message = "rank 1 found it\nsecond line";
  adopted.consequence = true;
  const auto decoded = FailureReport::decode(adopted.encode());
  ASSERT_TRUE(decoded);
  EXPECT_TRUE(decoded->consequence);
  EXPECT_EQ(decoded->unix_time_ns, 42);
  EXPECT_EQ(decoded->message, adopted.message);
  // Format 1, written before the flag, is read as a rank's own failure.
  const auto old = FailureReport::decode("distcomm-failure-report-1\n7\nold");
  ASSERT_TRUE(old);
  EXPECT_FALSE(old->consequence);
  EXPECT_EQ(old->message, "old");
  EXPECT_FALSE(FailureReport::decode("distcomm-failure-report-2\n7\nyes\nbad flag"));

  LocalRanks ranks(policy(AfterFailure::kLetEnd, milliseconds(10000)));
  ranks.fork_ranks(3, [](int rank) -> std::string {
    FailureReport r;
    r.unix_time_ns = FailureReport::now_ns() + (rank == 1 ? 1'000'000'000 : -1'000'000'000);
    r.message = rank == 1 ? "found it" : "adopted it";
    r.consequence = rank != 1;
    return r.encode();
  });
  ranks.watch();
  EXPECT_EQ(ranks.first_failure(), 1);
}

// A rank that reports the loss of another (FailureReport::lost_rank) comes after that rank
// when it failed on its own, though the lost rank left no report and its exit (a code, not
// a signal) was seen after the report's time: the loser died before anyone saw it
// (helper-68: the launcher named a survivor that saw rank 1's _exit(3), 1 run in 10 under
// load). A loss of a rank the stop ended does not count. The format keeps the field.
TEST(LocalRanks, ARankThatReportsALossIsNotTheCauseWhenTheLostRankFailedOnItsOwn) {
  FailureReport loss;
  loss.unix_time_ns = 42;
  loss.message = "rank 1 died";
  loss.lost_rank = 1;
  const auto decoded = FailureReport::decode(loss.encode());
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->lost_rank, 1);
  EXPECT_FALSE(decoded->consequence);
  EXPECT_EQ(decoded->message, "rank 1 died");
  const auto v2 = FailureReport::decode("distcomm-failure-report-2\n7\n1\nadopted");
  ASSERT_TRUE(v2);
  EXPECT_EQ(v2->lost_rank, -1);
  EXPECT_TRUE(v2->consequence);
  EXPECT_FALSE(FailureReport::decode("distcomm-failure-report-3\n7\n0\nx1\nbad rank"));
  EXPECT_FALSE(FailureReport::decode("distcomm-failure-report-3\n7\n0\n-2\nbad rank"));

  LocalRanks ranks(policy(AfterFailure::kLetEnd, milliseconds(10000)));
  ranks.fork_ranks(3, [](int rank) -> std::string {
    if (rank == 1) {
      std::this_thread::sleep_for(milliseconds(300));  // seen well after the others' reports
      ::_exit(3);
    }
    FailureReport r;
    r.unix_time_ns = FailureReport::now_ns() - 1'000'000'000;
    r.message = "rank 1 died";
    r.lost_rank = 1;
    return r.encode();
  });
  ranks.watch();
  EXPECT_EQ(ranks.first_failure(), 1) << "the rank whose loss the others report";

  // The lost rank was ended by the stop: the rank that reported its loss is the cause.
  LocalRanks stopped(policy(AfterFailure::kTerminate, milliseconds(5000)));
  stopped.fork_ranks(2, [](int rank) -> std::string {
    if (rank == 1) wait_forever();
    FailureReport r;
    r.unix_time_ns = FailureReport::now_ns();
    r.message = "rank 1 went silent";
    r.lost_rank = 1;
    return r.encode();
  });
  stopped.watch();
  EXPECT_EQ(stopped.first_failure(), 0);
  expect_no_children();
}

std::string report_of(bool consequence, const std::string& message) {
  FailureReport r;
  r.unix_time_ns = FailureReport::now_ns();
  r.message = message;
  r.consequence = consequence;
  return r.encode();
}

// The ranks that adopted rank 1's failure exit first; the stop waits for rank 1, which then
// reports its own and is seen as the first failure. Without the hold the SIGTERM ended rank
// 1 before it reported, and an adopted report named the cause.
TEST(LocalRanks, TheStopWaitsForTheRankWhoseFailureWasAdopted) {
  RankWatchOptions o = policy(AfterFailure::kTerminate, milliseconds(300));
  o.adopted_failure_hold = milliseconds(10000);
  LocalRanks ranks(o);
  ranks.fork_ranks(3, [](int rank) -> std::string {
    if (rank != 1) return report_of(true, "rank 1 found it, which cut this op off");
    std::this_thread::sleep_for(milliseconds(300));
    return report_of(false, "found it");
  });
  const auto start = Clock::now();
  ranks.watch();
  EXPECT_LT(seconds_since(start), 5.0) << "the hold ends when rank 1 exits, not when it runs out";
  EXPECT_EQ(ranks.first_seen_failure(), 1);
  EXPECT_EQ(ranks.first_failure(), 1);
  for (size_t r = 0; r < 3; ++r) EXPECT_FALSE(ranks[r].stopped) << "rank " << r;
  expect_no_children();
}

// A hold runs out: the adopted failure is then the first seen, and the others are stopped.
TEST(LocalRanks, AHoldThatRunsOutStopsTheOthers) {
  RankWatchOptions o = policy(AfterFailure::kTerminate, milliseconds(300));
  o.adopted_failure_hold = milliseconds(400);
  LocalRanks ranks(o);
  ranks.fork_ranks(2, [](int rank) -> std::string {
    if (rank == 0) return report_of(true, "rank 1 found it, which cut this op off");
    wait_forever();
  });
  const auto start = Clock::now();
  ranks.watch();
  EXPECT_GE(seconds_since(start), 0.35);
  EXPECT_LT(seconds_since(start), 5.0);
  EXPECT_EQ(ranks.first_seen_failure(), 0);
  EXPECT_EQ(ranks.stop_cause(), StopCause::kFailure);
  EXPECT_TRUE(ranks[1].stopped);
  EXPECT_EQ(describe_wait_status(ranks[1].status), "signal SIGTERM (Terminated)");
  expect_no_children();
}

// kLetEnd (the test harness): after a failure the others get the grace, no signal, then SIGKILL.
TEST(LocalRanks, AfterAFailureTheOthersGetTheGraceThenSigkill) {
  LocalRanks ranks(policy(AfterFailure::kLetEnd, milliseconds(500), milliseconds(60000)));
  ranks.fork_ranks(2, [](int rank) -> std::string {
    if (rank == 0) return "failed";
    wait_forever();
  });
  const auto start = Clock::now();
  ranks.watch();
  EXPECT_GE(seconds_since(start), 0.45);
  EXPECT_LT(seconds_since(start), 5.0);
  EXPECT_EQ(ranks.stop_cause(), StopCause::kFailure);
  EXPECT_EQ(ranks.first_seen_failure(), 0);
  EXPECT_FALSE(ranks[0].stopped);
  EXPECT_TRUE(ranks[1].stopped);
  EXPECT_EQ(describe_wait_status(ranks[1].status), "signal SIGKILL (Killed)");
}

TEST(LocalRanks, TheTimeLimitStopsAHang) {
  LocalRanks ranks(policy(AfterFailure::kLetEnd, milliseconds(20000), milliseconds(400)));
  ranks.fork_ranks(2, [](int rank) -> std::string {
    if (rank == 1) wait_forever();
    return "";
  });
  const auto start = Clock::now();
  ranks.watch();
  EXPECT_LT(seconds_since(start), 5.0);
  EXPECT_EQ(ranks.stop_cause(), StopCause::kTimeLimit);
  EXPECT_EQ(ranks.first_seen_failure(), -1);
  EXPECT_FALSE(ranks.failed(0));
  EXPECT_TRUE(ranks[1].stopped);
}

TEST(LocalRanks, AnExpectedSigkillIsNoFailure) {
  RankWatchOptions o = policy(AfterFailure::kTerminate, milliseconds(100));
  o.may_be_killed = {1};
  LocalRanks ranks(o);
  ranks.fork_ranks(2, [](int rank) -> std::string {
    if (rank == 1) ::raise(SIGKILL);
    std::this_thread::sleep_for(milliseconds(200));
    return "";
  });
  ranks.watch();
  EXPECT_FALSE(ranks.failed(1));
  EXPECT_EQ(ranks.first_seen_failure(), -1);
  EXPECT_EQ(ranks.first_failure(), -1);
  EXPECT_EQ(ranks.stop_cause(), StopCause::kNone);
  EXPECT_TRUE(exited_cleanly(ranks[0].status)) << "rank 0 was not stopped";
}

TEST(LocalRanks, ARankThatCannotStartStopsTheOnesBefore) {
  LocalRanks ranks(policy(AfterFailure::kLetEnd, milliseconds(0)));
  try {
    ranks.start(3, [](int rank) {
      if (rank == 2) throw std::runtime_error("fork: no more processes");
      return fork_child([]() -> std::string { wait_forever(); });
    });
    FAIL() << "start did not throw";
  } catch (const RankStartError& e) {
    EXPECT_EQ(e.rank, 2);
    EXPECT_STREQ(e.what(), "fork: no more processes");
  }
  EXPECT_EQ(ranks.running(), 0);
  expect_no_children();
}

// kCallerStops (the launcher): the library notes the first failure but stops nobody; the
// caller's terminate and kill keep the grace.
TEST(LocalRanks, TheCallerStopsWithItsOwnGrace) {
  LocalRanks ranks(policy(AfterFailure::kCallerStops, milliseconds(0)));
  int handler_set[2];
  ASSERT_EQ(::pipe(handler_set), 0);
  ranks.fork_ranks(2, [&](int rank) -> std::string {
    if (rank == 0) {
      char byte;  // fails once rank 1 ignores SIGTERM, so that the stop below meets that
      ::_exit(::read(handler_set[0], &byte, 1) == 1 ? 3 : 9);
    }
    ::signal(SIGTERM, SIG_IGN);
    if (::write(handler_set[1], "r", 1) != 1) ::_exit(9);
    wait_forever();
  });
  ::close(handler_set[0]);
  ::close(handler_set[1]);
  const auto start = Clock::now();
  while (ranks.first_seen_failure() < 0 && seconds_since(start) < 30) ranks.watch_once(milliseconds(1000));
  ASSERT_EQ(ranks.first_seen_failure(), 0);
  ranks.watch_once(milliseconds(200));
  EXPECT_EQ(ranks.running(), 1) << "the library stopped a rank on its own";
  ranks.begin_stop(StopCause::kCaller);
  ranks.terminate(milliseconds(300));
  const auto terminated = Clock::now();
  while (!ranks.kill_due() && seconds_since(start) < 30) ranks.watch_once(milliseconds(1000));
  EXPECT_GE(seconds_since(terminated), 0.29);
  EXPECT_LT(seconds_since(terminated), 5.0) << "the wait was not shortened to the grace";
  ranks.kill();
  ranks.watch();
  EXPECT_EQ(describe_wait_status(ranks[1].status), "signal SIGKILL (Killed)");
  EXPECT_EQ(ranks.first_failure(), 0);
  EXPECT_EQ(ranks.stop_cause(), StopCause::kCaller);
}

}  // namespace
}  // namespace local
}  // namespace distcomm
