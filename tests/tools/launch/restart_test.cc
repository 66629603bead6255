// --max_restarts end to end: the real launcher restarting real rank processes.
#include <dirent.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <regex>
#include <set>

#include <gtest/gtest.h>

#include "tests/tools/launch/launcher_harness.h"

namespace distcomm {
namespace testing {
namespace {

using std::chrono::seconds;

const std::string kProbe = rank_probe_path();
const auto* const kAdoptOrphans = ::testing::AddGlobalTestEnvironment(new AdoptOrphans);

struct Ready {
  pid_t pid, grandchild;
  std::string run_id, token, port;
};

// "ready <pid> <grandchild> run <id> token <prefix> port <port>" lines of rank_probe.
std::vector<Ready> ready_lines(const std::string& out) {
  std::vector<Ready> all;
  std::regex ready(R"(ready (\d+) (\d+) run (\S+) token (\S+) port (\d+))");
  for (std::sregex_iterator it(out.begin(), out.end(), ready), end; it != end; ++it) {
    all.push_back({std::stoi((*it)[1]), std::stoi((*it)[2]), (*it)[3], (*it)[4], (*it)[5]});
  }
  return all;
}

void expect_all_gone(const std::vector<Ready>& ready) {
  for (const Ready& r : ready) {
    EXPECT_FALSE(process_exists(r.pid)) << "rank pid " << r.pid << " survived the job";
    EXPECT_FALSE(process_exists(r.grandchild)) << "pid " << r.grandchild << " (started by a rank) survived the job";
  }
}

int count(const std::string& text, const std::regex& pattern) {
  return static_cast<int>(std::distance(std::sregex_iterator(text.begin(), text.end(), pattern), std::sregex_iterator()));
}

TEST(Restart, AProgramThatFailsOnItsFirstAttemptFinishesWithOneRestart) {
  const std::string tmp = fresh_tmpdir("once");
  Finished f = run(launch({"--nproc_per_node=3", "--max_restarts=1"}, {kProbe, "fail_first", "1", "3"}), seconds(60),
                   {"TMPDIR=" + tmp});
  ASSERT_EQ(exit_code(f), 0) << f.err;
  EXPECT_EQ(count(f.err, std::regex(R"(launch: rank 1 failed \(exit code 3\); restart 1 of 1 in \d+\.\d s\n)")), 1)
      << f.err;
  EXPECT_EQ(f.err.find("gave up"), std::string::npos) << f.err;
  // The second attempt's ranks say which attempt it is, in both spellings.
  std::set<std::string> ports_after, run_ids_after;
  std::regex env_line(R"(\[rank (\d)\] RANK=\d .* MASTER_PORT=(\d+) .*DISTCOMM_RESTART_COUNT=1 )"
                      R"(TORCHELASTIC_RESTART_COUNT=1 TORCHELASTIC_MAX_RESTARTS=1 DISTCOMM_RUN_ID=(\S+) .*)");
  int restarted_ranks = 0;
  for (const std::string& l : lines_of(f.out)) {
    std::smatch m;
    if (!std::regex_match(l, m, env_line)) continue;
    ++restarted_ranks;
    ports_after.insert(m[2]);
    run_ids_after.insert(m[3]);
  }
  EXPECT_EQ(restarted_ranks, 3) << f.out;
  // The first attempt's ranks (the two that did not fail) and their helpers are gone, and
  // the second attempt was a new job to them: another run id, token and port.
  std::vector<Ready> first = ready_lines(f.out);
  ASSERT_EQ(first.size(), 2u) << f.out;
  expect_all_gone(first);
  ASSERT_EQ(run_ids_after.size(), 1u);
  ASSERT_EQ(ports_after.size(), 1u);
  EXPECT_NE(*run_ids_after.begin(), first[0].run_id) << "a restart must be a new job to its ranks";
  EXPECT_NE(*ports_after.begin(), first[0].port) << "a restart must use a fresh store port";
  EXPECT_TRUE(entries_of(tmp).empty()) << "the launcher left files in TMPDIR";
  EXPECT_TRUE(no_orphan_running());
}

TEST(Restart, EachAttemptHasAFreshTokenAndTheAttemptsDoNotShareFiles) {
  Finished f = run(launch({"--nproc_per_node=2", "--max_restarts=2"}, {kProbe, "fail", "0", "4"}), seconds(60));
  EXPECT_EQ(exit_code(f), 4) << f.err;
  std::vector<Ready> ready = ready_lines(f.out);  // rank 1 of each of the 3 attempts
  ASSERT_EQ(ready.size(), 3u) << f.out;
  std::set<std::string> tokens, run_ids;
  for (const Ready& r : ready) {
    tokens.insert(r.token);
    run_ids.insert(r.run_id);
  }
  EXPECT_EQ(tokens.size(), 3u) << "every attempt needs its own store token";
  EXPECT_EQ(run_ids.size(), 3u) << "every attempt needs its own run id";
}

TEST(Restart, AProgramThatAlwaysFailsGivesUpAfterNRestartsWithItsExitCode) {
  const std::string tmp = fresh_tmpdir("always");
  Finished f = run(launch({"--nproc_per_node=3", "--max_restarts=2"}, {kProbe, "fail", "2", "7"}), seconds(60),
                   {"TMPDIR=" + tmp});
  EXPECT_EQ(exit_code(f), 7) << "the last failure's exit code: " << f.err;
  EXPECT_EQ(count(f.err, std::regex(R"(launch: rank 2 failed \(exit code 7\); restart [12] of 2 in \d+\.\d s\n)")), 2)
      << f.err;
  EXPECT_NE(f.err.find("launch: rank 2 failed (exit code 7); gave up after 2 restarts (--max_restarts=2)\n"),
            std::string::npos)
      << f.err;
  EXPECT_EQ(f.err.find("restart 3 of"), std::string::npos) << f.err;
  std::vector<Ready> ready = ready_lines(f.out);
  EXPECT_EQ(ready.size(), 6u) << "two ranks per attempt wait to be stopped: " << f.out;
  expect_all_gone(ready);
  EXPECT_TRUE(entries_of(tmp).empty()) << "the launcher left files in TMPDIR";
  EXPECT_TRUE(no_orphan_running());
}

TEST(Restart, WithoutMaxRestartsAFailureStillEndsTheJob) {
  Finished f = run(launch({"--nproc_per_node=2"}, {kProbe, "fail_first", "1", "3"}), seconds(60));
  EXPECT_EQ(exit_code(f), 3) << f.err;
  EXPECT_EQ(f.err.find("restart"), std::string::npos) << f.err;
  EXPECT_EQ(f.err.find("gave up"), std::string::npos) << "no restart was allowed: nothing to give up: " << f.err;
}

// The program is gone when the restart comes (a rebuild replaced it, it was deleted): the job
// ends with the failure that asked for the restart and says why no restart ran (helper-53's
// review: the launcher printed its usage hint and exited 2, as for a mistyped command line).
TEST(Restart, AProgramGoneBeforeTheRestartEndsTheJobWithTheFailure) {
  const std::string program = temp_path("deletes_itself.sh");
  {
    std::ofstream out(program);
    out << "#!/bin/sh\nrm -f \"$0\"\nexit 3\n";
  }
  ASSERT_EQ(::chmod(program.c_str(), 0755), 0);
  Finished f = run(launch({"--max_restarts=2"}, {program}), seconds(60));
  EXPECT_EQ(exit_code(f), 3) << f.err;
  EXPECT_NE(f.err.find("launch: restart 1 cannot start: '" + program + "' does not exist; the job failed: "
                       "rank 0 failed (exit code 3)"),
            std::string::npos)
      << f.err;
  EXPECT_EQ(f.err.find("usage:"), std::string::npos) << f.err;
}

// Ctrl-C while the failed attempt's ranks are being stopped (they ignore SIGTERM, and the
// grace period is long): the ranks are killed at once, no new attempt starts.
TEST(Restart, CtrlCWhileStoppingForARestartEndsEverything) {
  const std::string tmp = fresh_tmpdir("ctrl_c_stopping");
  Subprocess p(launch({"--nproc_per_node=3", "--max_restarts=3", "--grace_period_s=60"},
                      {kProbe, "fail", "1", "3", "ignore_term"}),
               {"TMPDIR=" + tmp}, /*merge_stderr=*/true);
  ASSERT_TRUE(p.wait_for_stdout("launch: rank 1 failed: stopping 2 ranks", 1, seconds(30)));
  const auto start = std::chrono::steady_clock::now();
  p.send_signal(SIGINT);
  Finished f = p.finish(seconds(30));
  ASSERT_FALSE(f.timed_out) << f.out;
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(10)) << "Ctrl-C must not wait out the grace period";
  EXPECT_EQ(exit_code(f), 128 + SIGINT) << f.out;
  EXPECT_NE(f.out.find("launch: got SIGINT while stopping after the failure: no restart"), std::string::npos) << f.out;
  EXPECT_EQ(f.out.find("restart 1 of"), std::string::npos) << f.out;
  std::vector<Ready> ready = ready_lines(f.out);
  EXPECT_EQ(ready.size(), 2u) << f.out;
  expect_all_gone(ready);
  EXPECT_TRUE(entries_of(tmp).empty()) << "the launcher left files in TMPDIR";
  EXPECT_TRUE(no_orphan_running());
}

// Ctrl-C as soon as the restart is announced, while the new attempt's ranks are starting.
// (They then wait to be stopped: were they to fail again by themselves, as they did before,
// a Ctrl-C that a loaded machine delivers late could find "restart 2" already begun.)
TEST(Restart, CtrlCJustAfterARestartBeganEndsEverything) {
  const std::string tmp = fresh_tmpdir("ctrl_c_restart");
  Subprocess p(launch({"--nproc_per_node=3", "--max_restarts=3"}, {kProbe, "fail_first_then_wait", "1", "3"}),
               {"TMPDIR=" + tmp}, /*merge_stderr=*/true);
  ASSERT_TRUE(p.wait_for_stdout("restart 1 of 3", 1, seconds(30)));
  p.send_signal(SIGINT);
  Finished f = p.finish(seconds(30));
  ASSERT_FALSE(f.timed_out) << f.out;
  EXPECT_EQ(exit_code(f), 128 + SIGINT) << f.out;
  EXPECT_EQ(f.out.find("restart 2 of"), std::string::npos) << f.out;
  expect_all_gone(ready_lines(f.out));
  EXPECT_TRUE(entries_of(tmp).empty()) << "the launcher left files in TMPDIR";
  EXPECT_TRUE(no_orphan_running());
}

TEST(Restart, LogsOfARestartedAttemptGoBesideTheFailedOnes) {
  const std::string dir = temp_path("restart_logs");
  Finished f = run(launch({"--nproc_per_node=2", "--max_restarts=1", "--log_dir=" + dir},
                          {kProbe, "fail_first", "1", "3"}),
                   seconds(60));
  ASSERT_EQ(exit_code(f), 0) << f.err;
  EXPECT_NE(read_file(dir + "/rank_0.log").find("ready "), std::string::npos) << "the failed attempt's log was lost";
  EXPECT_NE(read_file(dir + "/attempt_1/rank_0.log").find("DISTCOMM_RESTART_COUNT=1"), std::string::npos);
}

}  // namespace
}  // namespace testing
}  // namespace distcomm
