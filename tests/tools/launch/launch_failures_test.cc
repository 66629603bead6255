// The launcher binary end to end when a job fails or is stopped: which rank is named as the
// cause (by its error file's time, or its death's), how the others are stopped (SIGTERM,
// SIGKILL after the grace period, the launcher's own stopping signal passed on), and
// --on_failure=continue with its replacements. Apart from launch_test.cc (the rest: the
// ranks' environment, output, store and flags) to keep each file short.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "tests/tools/launch/launcher_harness.h"

namespace distcomm {
namespace testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

const std::string kProbe = rank_probe_path();

// The pids of "ready <pid> <grandchild>" lines: every rank and what it started.
std::vector<pid_t> ready_pids(const std::string& out) {
  std::vector<pid_t> pids;
  std::regex ready(R"(ready (\d+) (\d+))");
  for (std::sregex_iterator it(out.begin(), out.end(), ready), end; it != end; ++it) {
    pids.push_back(std::stoi((*it)[1]));
    pids.push_back(std::stoi((*it)[2]));
  }
  return pids;
}

const auto* const kAdoptOrphans = ::testing::AddGlobalTestEnvironment(new AdoptOrphans);

void expect_all_gone(const std::vector<pid_t>& pids) {
  for (pid_t pid : pids) EXPECT_FALSE(process_exists(pid)) << "pid " << pid << " survived the job (or was not reaped)";
}

TEST(Launch, RankExitingNonZeroStopsTheJobAndIsNamed) {
  auto start = std::chrono::steady_clock::now();
  Finished f = run(launch({"--nproc_per_node=3"}, {kProbe, "fail", "1", "3"}));
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(exit_code(f), 3) << "the launcher exits with the failed rank's code";
  EXPECT_NE(f.err.find("launch: rank 1 (local rank 1, pid "), std::string::npos) << f.err;
  EXPECT_NE(f.err.find("failed: exit code 3"), std::string::npos) << f.err;
  EXPECT_NE(f.err.find("stopping 2 ranks"), std::string::npos) << f.err;
  // The last line names the cause, also where it was the first failure seen.
  const std::string last = f.err.substr(f.err.rfind('\n', f.err.size() - 2) + 1);
  EXPECT_TRUE(std::regex_match(last, std::regex(R"(launch: rank 1 \(local rank 1, pid \d+\) failed first \(exit code 3\)\n)")))
      << last;
  EXPECT_EQ(ready_pids(f.out).size(), 4u) << f.out;
  expect_all_gone(ready_pids(f.out));
  EXPECT_LT(took, seconds(4)) << "SIGTERM, not the 5 s grace period, should end the others";
}

// Rank 1 fails first but is still exiting when rank 0, failing because of it, is seen
// exiting: the launcher names rank 1, from the time in its error file.
TEST(Launch, TheRankThatFailedFirstIsTheCause) {
  Finished f = run(launch({"--nproc_per_node=3"}, {kProbe, "cascade", "1"}));
  EXPECT_EQ(exit_code(f), 5) << "the launcher exits with the first failure's code: " << f.err;
  EXPECT_NE(f.err.find("launch: rank 1 (local rank 1, pid "), std::string::npos) << f.err;
  EXPECT_NE(f.err.find("failed first (exit code 5): the cause"), std::string::npos) << f.err;
}

// Rank 1 found the failure; ranks 0 and 2 adopted it (their reports say so) and wrote
// theirs first, with earlier times, and exited at once; the stop's SIGTERM ended rank 1.
// The launcher names rank 1, and exits with 1 (its error), not 143 (the stop's signal).
TEST(Launch, TheRankWhoseFailureTheOthersAdoptedIsTheCause) {
  Finished f = run(launch({"--nproc_per_node=3"}, {kProbe, "adopted", "1"}));
  EXPECT_EQ(exit_code(f), 1) << f.err;
  EXPECT_NE(f.err.find("launch: rank 1 (local rank 1, pid "), std::string::npos) << f.err;
  EXPECT_NE(f.err.find("failed first (reported its error; the stop ended it by SIGTERM): Desync: found by this rank"),
            std::string::npos)
      << f.err;
}

// Rank 1 found the failure, and the ranks it cut off report it and exit before rank 1 has
// written its own report (as a real finder publishes and cuts first). The launcher holds
// the stop's SIGTERM for it (local::kAdoptedFailureHold): without that, the SIGTERM ended
// rank 1 unreported and the launcher named rank 0 or 2, who only adopted its failure.
TEST(Launch, TheStopWaitsForTheRankWhoseFailureWasAdopted) {
  Finished f = run(launch({"--nproc_per_node=3"}, {kProbe, "late_finder", "1"}));
  EXPECT_EQ(exit_code(f), 1) << f.err;
  EXPECT_NE(f.err.find("launch: rank 1 (local rank 1, pid "), std::string::npos) << f.err;
  EXPECT_NE(f.err.find("failed first (exit code 1): Desync: found by this rank"), std::string::npos) << f.err;
  EXPECT_EQ(f.err.find("SIGTERM"), std::string::npos) << "no rank should need stopping: " << f.err;
}

// Whether the process whose pid `pid_file` holds (once written) has died within `limit`:
// a zombie the stopped launcher has not reaped counts.
bool dead_within(const std::string& pid_file, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  auto dead = [&] {
    const std::string pid = read_file(pid_file);
    if (pid.empty()) return false;
    std::ifstream stat("/proc/" + pid + "/stat");
    std::string field, name, state;
    return !(stat >> field >> name >> state) || state == "Z";
  };
  // One look per round, its answer the result: a second look could read the file while the
  // rank rewrites it (truncated, then written) and find no pid.
  for (;;) {
    if (dead()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    ::usleep(1000);
  }
}

// The pid files the victim probes write: an earlier test's (the same names in the same
// TEST_TMPDIR) would be read as this test's ranks, already dead (CI, once: "rank 0 never
// reported the death and exited" 45 ms into the test, the stale file read as dead, then read
// empty while the new rank 0 rewrote it).
void forget_earlier_pid_files() {
  for (const std::string name : {"victim_pid", "reported_0", "reported_1", "reported_2", "reported_3"}) {
    std::remove(temp_path(name).c_str());
  }
}

// Rank 1 is killed from outside while the launcher cannot run (stopped); the others notice
// its death and report it, with times before the launcher sees any exit. The launcher must
// still name rank 1, whose death came first, not one of the ranks that reported it.
TEST(Launch, ARankKilledFromOutsideIsTheCauseOfTheReportsAboutIt) {
  forget_earlier_pid_files();
  Subprocess p(launch({"--nproc_per_node=3"}, {kProbe, "victim", "1"}));
  ASSERT_TRUE(p.wait_for_stdout("victim ", 1, seconds(30)));
  const pid_t victim = std::stoi(read_file(temp_path("victim_pid")));
  p.send_signal(SIGSTOP);
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  // Until both reporters have exited (zombies the stopped launcher has not reaped): the
  // launcher then sees all three exits at once, and must pick the cause by time.
  for (int rank : {0, 2}) {
    ASSERT_TRUE(dead_within(temp_path("reported_" + std::to_string(rank)), seconds(30)))
        << "rank " << rank << " never reported the death and exited";
  }
  p.send_signal(SIGCONT);
  Finished f = p.finish(seconds(30));
  EXPECT_EQ(exit_code(f), 128 + SIGKILL) << f.err;
  EXPECT_TRUE(std::regex_search(f.err, std::regex(R"(rank 1 \(local rank 1, pid \d+\) failed first \(signal SIGKILL)")))
      << f.err;
}

// The same for a rank that exits with a code of its own (_exit(3), no error file): the
// others report its loss before the stopped launcher sees its exit, and are not the cause
// (helper-68: the launcher named a survivor, 1 run in 10 under load, and exited 1).
TEST(Launch, ARankThatExitsWithACodeIsTheCauseOfTheReportsAboutIt) {
  forget_earlier_pid_files();
  Subprocess p(launch({"--nproc_per_node=3"}, {kProbe, "victim", "1", "exit"}));
  ASSERT_TRUE(p.wait_for_stdout("victim ", 1, seconds(30)));
  const pid_t victim = std::stoi(read_file(temp_path("victim_pid")));
  p.send_signal(SIGSTOP);
  ASSERT_EQ(::kill(victim, SIGUSR2), 0);
  for (int rank : {0, 2}) {
    ASSERT_TRUE(dead_within(temp_path("reported_" + std::to_string(rank)), seconds(30)))
        << "rank " << rank << " never reported the death and exited";
  }
  p.send_signal(SIGCONT);
  Finished f = p.finish(seconds(30));
  EXPECT_EQ(exit_code(f), 3) << f.err;
  EXPECT_TRUE(std::regex_search(f.err, std::regex(R"(rank 1 \(local rank 1, pid \d+\) failed first \(exit code 3\))")))
      << f.err;
}

// Two ranks die together, by signals the launcher did not send: both are named, the one
// that is not the cause in the line before the last (helper-68: the second one, a SIGSEGV,
// was never mentioned). Here both are dead before the launcher looks, so one poll reaps
// both; the race helper-68 hit (the second reaped only after the stop began) is
// LocalProcesses.AChildDeadBeforeTheStopIsNotMarkedStopped's.
TEST(Launch, TwoRanksThatDieTogetherAreBothNamed) {
  Subprocess p(launch({"--nproc_per_node=4"}, {kProbe, "victims", "1", "2"}));
  ASSERT_TRUE(p.wait_for_stdout("victim ", 2, seconds(30)));
  p.send_signal(SIGSTOP);
  for (auto [rank, sig] : {std::pair<int, int>{1, SIGKILL}, {2, SIGSEGV}}) {
    const std::string pid_file = temp_path("victim_pid_" + std::to_string(rank));
    ASSERT_EQ(::kill(std::stoi(read_file(pid_file)), sig), 0);
    ASSERT_TRUE(dead_within(pid_file, seconds(30))) << "rank " << rank << " did not die";
  }
  p.send_signal(SIGCONT);
  Finished f = p.finish(seconds(30));
  EXPECT_TRUE(std::regex_search(f.err, std::regex(R"(rank 1 \(local rank 1, pid \d+\) failed first \(signal SIGKILL)")))
      << f.err;
  EXPECT_TRUE(std::regex_search(
      f.err, std::regex(R"(also failed, with no error file: rank 2 \(pid \d+, signal SIGSEGV \(Segmentation fault\)\))")))
      << f.err;
}

TEST(Launch, RankKilledBySignalIsNamed) {
  Finished f = run(launch({"--nproc_per_node=3"}, {kProbe, "signal", "2", std::to_string(SIGSEGV)}));
  EXPECT_EQ(exit_code(f), 128 + SIGSEGV);
  EXPECT_NE(f.err.find("rank 2 (local rank 2, pid "), std::string::npos) << f.err;
  EXPECT_NE(f.err.find("failed: signal SIGSEGV (Segmentation fault)"), std::string::npos) << f.err;
  expect_all_gone(ready_pids(f.out));
}

TEST(Launch, RanksIgnoringSigtermAreKilledAfterTheGracePeriod) {
  Subprocess p(launch({"--nproc_per_node=2", "--grace_period_s=0.5"}, {kProbe, "wait", "ignore_term"}));
  ASSERT_TRUE(p.wait_for_stdout("ready", 2, seconds(30)));
  p.send_signal(SIGTERM);
  Finished f = p.finish(seconds(10));
  EXPECT_EQ(exit_code(f), 128 + SIGTERM);
  EXPECT_NE(f.err.find("got SIGTERM: stopping 2 ranks (SIGTERM, then SIGKILL after 0.5s)"), std::string::npos)
      << f.err;
  EXPECT_NE(f.err.find("rank 0 is still running: SIGKILL"), std::string::npos) << f.err;
  expect_all_gone(ready_pids(f.out));
}

// --on_failure=continue lets the others run on after a failure; a rank that is stopped
// (SIGSTOP) when every other rank has ended can never end by itself, nor be resumed by
// anything in the job. After the grace period so, it is stopped as a failed job's ranks are,
// and the job ends with the first failure. Before: the launcher waited for it for ever.
TEST(Launch, OnFailureContinueEndsRanksLeftStoppedAfterTheOthersEnded) {
  const auto start = std::chrono::steady_clock::now();
  Finished f = run(launch({"--nproc_per_node=2", "--on_failure=continue", "--grace_period_s=1"},
                          {"/bin/sh", "-c", "if [ \"$RANK\" = 1 ]; then kill -STOP $$; fi; exit 3"}),
                   seconds(30));
  const auto took = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start);
  EXPECT_EQ(exit_code(f), 3) << f.err;
  EXPECT_NE(f.err.find("rank(s) 1 stopped by job control (SIGSTOP, SIGTSTP) for 1s while every other rank here has ended after a failure"),
            std::string::npos)
      << f.err;
  EXPECT_LT(took.count(), 15000) << f.err;
}

// A rank that is stopped (SIGSTOP: hung, paused) gets SIGCONT after the stop's signal, so
// it acts on it at once instead of waiting for SIGKILL at the end of the grace period.
TEST(Launch, AStoppedRankIsContinuedToActOnTheStopSignal) {
  Subprocess p(launch({"--nproc_per_node=2", "--grace_period_s=30"}, {kProbe, "wait"}));
  ASSERT_TRUE(p.wait_for_stdout("ready", 2, seconds(30)));
  const std::vector<pid_t> pids = ready_pids(p.stdout_so_far());
  ASSERT_EQ(pids.size(), 4u);
  ASSERT_EQ(::kill(pids[0], SIGSTOP), 0);
  const auto start = std::chrono::steady_clock::now();
  p.send_signal(SIGTERM);
  Finished f = p.finish(seconds(60));
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(10)) << f.err;
  EXPECT_EQ(exit_code(f), 128 + SIGTERM) << f.err;
  EXPECT_EQ(f.err.find("still running: SIGKILL"), std::string::npos) << f.err;
  expect_all_gone(ready_pids(f.out));
}

// SIGQUIT stops the job as SIGTERM does (torchrun's agent handles it too): before, the
// launcher died of it at once, without a word, and the ranks got no grace period.
TEST(Launch, SigquitStopsEveryRank) {
  Subprocess p(launch({"--nproc_per_node=2"}, {kProbe, "wait"}));
  ASSERT_TRUE(p.wait_for_stdout("ready", 2, seconds(30)));
  p.send_signal(SIGQUIT);
  Finished f = p.finish(seconds(10));
  ASSERT_FALSE(f.timed_out);
  EXPECT_EQ(exit_code(f), 128 + SIGQUIT) << f.err;
  EXPECT_NE(f.err.find("launch: got SIGQUIT: stopping 2 ranks"), std::string::npos) << f.err;
  expect_all_gone(ready_pids(f.out));
}

TEST(Launch, CtrlCStopsEveryRankAndWhatTheyStarted) {
  Subprocess p(launch({"--nproc_per_node=3"}, {kProbe, "wait"}));
  ASSERT_TRUE(p.wait_for_stdout("ready", 3, seconds(30)));
  auto start = std::chrono::steady_clock::now();
  p.send_signal(SIGINT);
  Finished f = p.finish(seconds(10));
  ASSERT_FALSE(f.timed_out);
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(3)) << "the stopping signal (SIGINT), not SIGKILL after 5 s, ends them";
  EXPECT_EQ(exit_code(f), 128 + SIGINT);
  EXPECT_NE(f.err.find("launch: got SIGINT: stopping 3 ranks"), std::string::npos) << f.err;
  std::vector<pid_t> pids = ready_pids(f.out);
  EXPECT_EQ(pids.size(), 6u);
  expect_all_gone(pids);
}

// The signal that stops the launcher is the one its ranks get, as torchrun's agent passes it
// on: a program's Ctrl-C handler runs under the launcher too (the ranks lead process groups
// of their own, which the terminal's SIGINT does not reach). Before, they always got SIGTERM.
// A rank's failure stops the others with SIGTERM.
TEST(Launch, TheRanksGetTheSignalThatStoppedTheLauncher) {
  for (const auto& [sig, name] : {std::pair<int, std::string>{SIGINT, "SIGINT"}, {SIGHUP, "SIGHUP"},
                                  {SIGTERM, "SIGTERM"}}) {
    Subprocess p(launch({"--nproc_per_node=2"}, {kProbe, "say_signal"}));
    ASSERT_TRUE(p.wait_for_stdout("ready", 2, seconds(30))) << name;
    p.send_signal(sig);
    Finished f = p.finish(seconds(10));
    ASSERT_FALSE(f.timed_out) << name;
    EXPECT_EQ(exit_code(f), 128 + sig) << name << ": " << f.err;
    for (int rank : {0, 1}) {
      EXPECT_NE(f.out.find("rank " + std::to_string(rank) + " got " + name), std::string::npos)
          << name << ", rank " << rank << ": " << f.out;
    }
    EXPECT_NE(f.err.find("launch: got " + name + ": stopping 2 ranks (" + name + ", then SIGKILL"), std::string::npos)
        << f.err;
  }
}

// --on_failure=continue --replace_after_s: a failed rank's replacement starts after the
// delay with the same RANK, DISTCOMM_FT_JOIN=1 and its own member id, and when every rank's
// last process exits 0 the job has succeeded.
TEST(Launch, AFailedRanksReplacementJoinsAndTheJobSucceeds) {
  const auto started = std::chrono::steady_clock::now();
  Finished f = run(launch({"--nproc_per_node=3", "--on_failure=continue", "--replace_after_s=0.3"},
                          {kProbe, "replaced", "1", "7"}));
  EXPECT_EQ(exit_code(f), 0) << f.err;
  EXPECT_GE(std::chrono::steady_clock::now() - started, milliseconds(300)) << "the replacement came before its delay";
  EXPECT_NE(f.err.find("launch: rank 1 (local rank 1, pid "), std::string::npos) << f.err;
  EXPECT_NE(f.err.find("failed: exit code 7; 2 ranks run on (--on_failure=continue); its replacement starts in"),
            std::string::npos)
      << f.err;
  EXPECT_NE(f.err.find("started rank 1's replacement 1 (pid "), std::string::npos) << f.err;
  EXPECT_NE(f.out.find("[rank 1] replacement rank1+1 RANK=1"), std::string::npos) << f.out;
  EXPECT_NE(f.err.find("every rank's last process exited 0 (failed ranks were replaced): the job succeeded"),
            std::string::npos)
      << f.err;
}

// Two ranks fail and are replaced: the launcher's last line names both, not only the first
// failure (it named rank 1 alone when ranks 1 and 2 were both replaced).
TEST(Launch, TheLastLineNamesEveryReplacedRank) {
  const std::string script =
      "if [ \"$DISTCOMM_FT_JOIN\" = 1 ]; then exit 0; fi; "
      "if [ \"$RANK\" != 0 ]; then exit 7; fi; sleep 2; exit 0";
  Finished f = run(launch({"--nproc_per_node=3", "--on_failure=continue", "--replace_after_s=0.1"},
                          {"/bin/sh", "-c", script}));
  EXPECT_EQ(exit_code(f), 0) << f.err;
  const size_t last = f.err.rfind("launch: the job succeeded: ");
  ASSERT_NE(last, std::string::npos) << f.err;
  const std::string line = f.err.substr(last);
  for (const std::string rank : {"rank 1 failed", "rank 2 failed"}) {
    EXPECT_NE(line.find(rank), std::string::npos) << rank << " is not in the last line: " << line;
  }
  EXPECT_EQ(line.find('\n'), line.size() - 1) << "not the last line: " << line;
}

// The last rank to fail has no running rank for a replacement to join: its line says so,
// rather than promise a replacement that never starts (an outside soak: every rank killed
// at once, each line said "0 ranks run on ...; its replacement starts in 1s").
TEST(Launch, NoReplacementIsPromisedWhenNoRankRunsOn) {
  Finished f = run(launch({"--nproc_per_node=2", "--on_failure=continue", "--replace_after_s=1"},
                          {"/bin/sh", "-c", "exit 3"}));
  EXPECT_EQ(exit_code(f), 3) << f.err;
  EXPECT_NE(f.err.find("0 ranks run on (--on_failure=continue); not replaced: no rank of this machine runs on for a "
                       "replacement to join"),
            std::string::npos)
      << f.err;
  EXPECT_EQ(f.err.find("0 ranks run on (--on_failure=continue); its replacement starts"), std::string::npos) << f.err;
}

// A replacement that fails too leaves the job failed: the first failure is its exit code.
TEST(Launch, AReplacementThatFailsLeavesTheJobFailed) {
  Finished f = run(launch({"--nproc_per_node=2", "--on_failure=continue", "--replace_after_s=0"},
                          {kProbe, "replaced", "0", "7", "9"}));
  EXPECT_EQ(exit_code(f), 7) << f.err;
  EXPECT_NE(f.out.find("[rank 0] replacement rank0+1 RANK=0"), std::string::npos) << f.out;
  EXPECT_NE(f.err.find("failed: exit code 9"), std::string::npos) << "the replacement's failure is said: " << f.err;
  EXPECT_EQ(f.err.find("the job succeeded"), std::string::npos) << f.err;
}

// A rank whose every process fails is replaced --max_replacements times, then no more: the
// job fails with the first failure's code instead of forking without end.
TEST(Launch, ReplacementsStopAtMaxReplacements) {
  std::remove((std::string(std::getenv("TEST_TMPDIR")) + "/replaced_1").c_str());  // an earlier test's success
  Finished f = run(launch({"--nproc_per_node=2", "--on_failure=continue", "--replace_after_s=0",
                           "--max_replacements=2"},
                          {kProbe, "replaced", "1", "7", "8"}));
  EXPECT_EQ(exit_code(f), 7) << f.err;
  EXPECT_NE(f.err.find("started rank 1's replacement 2 "), std::string::npos) << f.err;
  EXPECT_EQ(f.err.find("started rank 1's replacement 3 "), std::string::npos) << f.err;
  EXPECT_NE(f.err.find("not replaced again: rank 1 has had 2 replacements (--max_replacements=2)"), std::string::npos)
      << f.err;
}

// Without --replace_after_s a failed rank stays failed, and the job exits with its code.
TEST(Launch, OnFailureContinueWithoutReplacementsExitsWithTheFailure) {
  Finished f = run(launch({"--nproc_per_node=2", "--on_failure=continue"}, {kProbe, "replaced", "1", "7"}),
                   seconds(60));
  EXPECT_EQ(exit_code(f), 7) << f.err;
  EXPECT_EQ(f.out.find("replacement"), std::string::npos) << f.out;
  EXPECT_NE(f.err.find("launch: the job failed; the first failure: rank 1 (local rank 1, pid "), std::string::npos)
      << "the job ends with a line that says so: " << f.err;
  EXPECT_NE(f.err.find("failed first (exit code 7); the last process did not exit 0 for rank 1: exit code 7 (not "
                       "replaced: no --replace_after_s)\n"),
            std::string::npos)
      << f.err;
}

// Many ranks failing alike: the last line says each way they ended and why once, the ranks
// as ranges, the first failure first (96 ranks once made a line of 7,221 characters saying
// "(not replaced: no --replace_after_s)" 95 times, the first failure at its very end).
TEST(Launch, ManyFailedRanksAreSummedUpInRanges) {
  Finished f = run(launch({"--nproc_per_node=12", "--on_failure=continue"},
                          {"/bin/sh", "-c", "if [ \"$RANK\" = 5 ]; then exit 4; fi; sleep 0.5; exit 3"}),
                   seconds(60));
  EXPECT_EQ(exit_code(f), 4) << f.err;
  const std::string last = f.err.substr(f.err.rfind('\n', f.err.size() - 2) + 1);
  EXPECT_TRUE(std::regex_match(last, std::regex(R"(launch: the job failed; the first failure: rank 5 \(local rank 5, )"
                                                R"(pid \d+\) failed first \(exit code 4\); the last process did not exit 0 for )"
                                                R"(ranks 0-4, 6-11: exit code 3, rank 5: exit code 4 \(not replaced: )"
                                                R"(no --replace_after_s\)\n)")))
      << last;
}

// The other ranks end before a failed rank's replacement is due: the job failed, and its
// last line says why rather than leaving the survivors' output last.
TEST(Launch, OthersEndingBeforeTheReplacementIsDueLeaveTheJobFailedAndSaySo) {
  std::remove((std::string(std::getenv("TEST_TMPDIR")) + "/replaced_1").c_str());  // an earlier test's success
  Finished f = run(launch({"--nproc_per_node=2", "--on_failure=continue", "--replace_after_s=30"},
                          {kProbe, "replaced", "1", "7"}),
                   seconds(60));
  EXPECT_EQ(exit_code(f), 7) << f.err;
  EXPECT_EQ(f.err.find("started rank 1's replacement"), std::string::npos) << f.err;
  const std::string closing =
      "launch: the job failed; the first failure: rank 1 (local rank 1, pid ";
  const size_t at = f.err.find(closing);
  ASSERT_NE(at, std::string::npos) << f.err;
  EXPECT_NE(f.err.find("; the last process did not exit 0 for rank 1: exit code 7 (its replacement was not due before "
                       "the other ranks ended)\n",
                       at),
            std::string::npos)
      << f.err;
  EXPECT_EQ(f.err.find('\n', at), f.err.size() - 1) << "it is the launcher's last line: " << f.err;
}

// The last line takes the first line of a rank's error, whole: one that introduced a list
// ended the job's summary at a dangling "Searched:" (helper-73).
TEST(Launch, TheLastLineEndsWithAWholeSentence) {
  Finished f = run(launch({"--nproc_per_node=1"}, {kProbe, "multiline_error"}));
  EXPECT_EQ(exit_code(f), 1) << f.err;
  const std::string last = f.err.substr(f.err.rfind('\n', f.err.size() - 2) + 1);
  EXPECT_TRUE(std::regex_match(last, std::regex(R"(launch: rank 0 \(local rank 0, pid \d+\) failed first \(exit code 1\): )"
                                                R"(cannot load backend 'x': no usable libdistcomm_x\.so\. )"
                                                R"(\(the rest in rank 0's output above\)\n)")))
      << last;
  EXPECT_NE(f.err.find("Searched:\n[rank 0]   /a/libdistcomm_x.so: not found"), std::string::npos) << f.err;
}

}  // namespace
}  // namespace testing
}  // namespace distcomm
