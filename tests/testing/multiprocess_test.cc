// Tests of the multi-process harness. Failing scenarios run in a child copy of this binary
// (the DISABLED_ tests below, selected by filter), whose output and exit status are checked:
// a harness that swallowed a rank's failure would make its scenario pass.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace testing {
namespace {

using Clock = std::chrono::steady_clock;

// --- Scenarios: each must FAIL, with the message the test below looks for.

TEST(HarnessScenario, DISABLED_GtestFailureInRank1) {
  run_ranks(3, [](int rank, int) { EXPECT_NE(rank, 1) << "marker-from-rank-1"; });
}

TEST(HarnessScenario, DISABLED_ExceptionInRank0) {
  run_ranks(2, [](int rank, int) {
    if (rank == 0) throw std::runtime_error("boom");
  });
}

TEST(HarnessScenario, DISABLED_AbortInRank1) {
  run_ranks(2, [](int rank, int) {
    if (rank == 1) std::abort();
  });
}

TEST(HarnessScenario, DISABLED_ExitStatus3) {
  run_ranks(2, [](int rank, int) {
    if (rank == 0) ::_exit(3);
  });
}

TEST(HarnessScenario, DISABLED_HangPastTheDeadline) {
  run_ranks(2, [](int rank, int) {
    if (rank == 1) std::this_thread::sleep_for(std::chrono::seconds(60));
  }, std::chrono::seconds(1));
}

TEST(HarnessScenario, DISABLED_FailureThenHang) {
  RunOptions o;
  o.grace_after_failure = std::chrono::seconds(1);
  run_ranks(2, [](int rank, int) {
    if (rank == 0) ADD_FAILURE() << "first";
    else std::this_thread::sleep_for(std::chrono::seconds(60));
  }, o);
}

struct ScenarioResult {
  int status = -1;
  std::string output;
  double seconds = 0;
};

ScenarioResult run_scenario(const std::string& name) {
  const std::string command = "/proc/" + std::to_string(::getpid()) +
                              "/exe --gtest_also_run_disabled_tests --gtest_filter=HarnessScenario.DISABLED_" + name +
                              " 2>&1";
  ScenarioResult r;
  const auto start = Clock::now();
  FILE* out = ::popen(command.c_str(), "r");
  if (!out) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), out)) > 0) r.output.append(buf, n);
  r.status = ::pclose(out);
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return r;
}

void expect_scenario_fails_with(const std::string& name, const std::string& message) {
  ScenarioResult r = run_scenario(name);
  EXPECT_NE(r.status, 0) << name << " should fail; output:\n" << r.output;
  EXPECT_NE(r.output.find(message), std::string::npos) << name << ": no '" << message << "' in:\n" << r.output;
}

TEST(Harness, ReportsAGtestFailureWithItsRankAndMessage) {
  expect_scenario_fails_with("GtestFailureInRank1", "rank 1 failed: ");
  expect_scenario_fails_with("GtestFailureInRank1", "marker-from-rank-1");
}

TEST(Harness, ReportsAnException) {
  expect_scenario_fails_with("ExceptionInRank0", "rank 0 failed: uncaught std::runtime_error: boom");
}

TEST(Harness, ReportsACrash) {
  expect_scenario_fails_with("AbortInRank1", "rank 1 failed: signal SIGABRT (Aborted)");
}

TEST(Harness, ReportsAnExitStatus) {
  expect_scenario_fails_with("ExitStatus3", "rank 0 failed: exit code 3");
}

TEST(Harness, KillsAHangAtTheDeadline) {
  ScenarioResult r = run_scenario("HangPastTheDeadline");
  EXPECT_NE(r.output.find("rank 1 timed out: still running after 1 s"), std::string::npos) << r.output;
  EXPECT_LT(r.seconds, 10) << "the hung rank must be killed at the 1 s deadline";
}

TEST(Harness, DoesNotWaitForTheDeadlineAfterAFailure) {
  ScenarioResult r = run_scenario("FailureThenHang");
  EXPECT_NE(r.output.find("rank 0 failed: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank 1 killed: still running 1 s after rank 0 failed"), std::string::npos) << r.output;
  EXPECT_LT(r.seconds, 10) << "the default 120 s deadline must not be waited out";
}

// --- Passing runs.

TEST(Harness, RunsEveryRankOnce) {
  const std::string dir = ::testing::TempDir();
  run_ranks(4, [&](int rank, int size) {
    EXPECT_EQ(size, 4);
    FILE* f = std::fopen((dir + "/rank" + std::to_string(rank)).c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fclose(f);
  });
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(::access((dir + "/rank" + std::to_string(r)).c_str(), F_OK), 0) << "rank " << r << " did not run";
  }
}

TEST(Harness, AcceptsAnExpectedKill) {
  RunOptions o;
  o.may_be_killed = {1};
  run_ranks(2, [](int rank, int) {
    if (rank == 1) ::raise(SIGKILL);
  }, o);
}

TEST(Harness, GivesEachRankAGroupOverEitherStore) {
  for (StoreKind kind : {StoreKind::kFile, StoreKind::kTcp}) {
    GroupHarnessOptions o;
    o.store = kind;
    run_group(3, "gloo", [](ProcessGroup& pg) {
      EXPECT_EQ(pg.size(), 3);
      Tensor t = Tensor::of<int32_t>({pg.rank()});
      pg.all_reduce(t)->wait();
      EXPECT_EQ(t.item(0), 0 + 1 + 2);
    }, o);
  }
}

}  // namespace
}  // namespace testing
}  // namespace distcomm
