// A job stopped from outside (launch/outside_stop.h): a scheduler (Slurm's scancel, a
// preemption, a pod's eviction) sends SIGTERM to every process of the job at once, launcher
// and ranks. A rank whose default action ends it can be dead, and reaped, before the
// launcher reads its own SIGTERM. These tests make that order certain -- the ranks are
// SIGTERMed and reaped first, then the launcher gets its SIGTERM -- with real launchers and
// ranks, and check that the launcher says the job was stopped from outside, names no rank
// as its failure, exits 128 + 15, and under --on_failure=continue promises no replacement;
// that an elastic launcher whose partner was stopped first starts no new round when its own
// SIGTERM follows; and that in a static job of two machines of which only one is stopped,
// the other names that stop, not its peer's loss, as the job's first failure. When only the
// ranks get SIGTERM (`pkill -TERM -f the_program`), the launcher says that they were
// terminated from outside it.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "api/process/local_processes.h"
#include "launch/job_failure_board.h"
#include "launch/outside_stop.h"
#include "tests/tools/launch/launcher_harness.h"
#include "tests/testing/port_wait.h"

namespace distcomm {
namespace testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

const auto* const kAdoptOrphans = ::testing::AddGlobalTestEnvironment(new AdoptOrphans);

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The ranks' pids, from their "ready <pid> <grandchild pid> ..." lines (rank_probe wait).
std::vector<pid_t> ready_pids(const std::string& out) {
  std::vector<pid_t> pids;
  for (size_t at = out.find("ready "); at != std::string::npos; at = out.find("ready ", at + 1)) {
    std::istringstream line(out.substr(at + 6));
    pid_t pid = -1;
    if (line >> pid) pids.push_back(pid);
  }
  return pids;
}

// Until /proc/<pid> is gone: the launcher reaped it (a zombie keeps its folder).
bool reaped_within(pid_t pid, milliseconds deadline) {
  const auto until = std::chrono::steady_clock::now() + deadline;
  struct stat st;
  while (::stat(("/proc/" + std::to_string(pid)).c_str(), &st) == 0) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return true;
}

// Starts a launcher of two waiting ranks, SIGTERMs both ranks and waits until the launcher
// has reaped them; then `launcher_too` SIGTERMs the launcher as well.
Finished ranks_then_launcher(const std::vector<std::string>& flags, bool launcher_too) {
  std::vector<std::string> all = {"--nproc_per_node=2", "--grace_period_s=5"};
  all.insert(all.end(), flags.begin(), flags.end());
  Subprocess launcher(launch(all, {rank_probe_path(), "wait"}));
  if (!launcher.wait_for_stdout("ready ", 2, seconds(30))) return launcher.finish(seconds(1));
  const std::vector<pid_t> ranks = ready_pids(launcher.stdout_so_far());
  for (pid_t pid : ranks) ::kill(pid, SIGTERM);
  for (pid_t pid : ranks) EXPECT_TRUE(reaped_within(pid, seconds(20))) << "rank pid " << pid;
  if (launcher_too) launcher.send_signal(SIGTERM);
  return launcher.finish(seconds(60));
}

// The whole job got SIGTERM, the ranks' reaped before the launcher read its own: the job was
// stopped, and no rank failed (it said "rank 0 (local rank 0, pid N) failed: signal SIGTERM"
// and "... failed first (signal SIGTERM (Terminated))", naming rank 0 as the culprit).
TEST(OutsideStop, AJobWhoseEveryProcessGotSigtermWasStoppedNotFailed) {
  const Finished f = ranks_then_launcher({}, /*launcher_too=*/true);
  ASSERT_FALSE(f.timed_out) << f.err;
  EXPECT_EQ(exit_code(f), 128 + SIGTERM) << f.err;
  EXPECT_TRUE(contains(f.err, "launch: the job was stopped by SIGTERM sent to the launcher from outside")) << f.err;
  EXPECT_TRUE(contains(f.err, "not by a failure: no rank failed on its own; ranks 0, 1 got SIGTERM from outside too; "
                              "exit status 143 (128 + 15)"))
      << f.err;
  EXPECT_FALSE(contains(f.err, ") failed")) << f.err;  // no "rank 0 (local rank 0, pid N) failed[ first]"
  EXPECT_TRUE(no_orphan_running());
}

// --on_failure=continue --replace_after_s (a fault-tolerant job): the ranks the scheduler's
// SIGTERM ended are not reported as failed, and no replacement is promised or started (it
// said "rank 0 (...) failed: signal SIGTERM (Terminated); 1 rank runs on ...; its replacement
// starts in 0.2s").
TEST(OutsideStop, AStoppedFaultTolerantJobStartsNoReplacement) {
  Subprocess launcher(launch({"--nproc_per_node=2", "--grace_period_s=5", "--on_failure=continue",
                              "--replace_after_s=0.2"},
                             {rank_probe_path(), "wait"}));
  ASSERT_TRUE(launcher.wait_for_stdout("ready ", 2, seconds(30))) << launcher.stdout_so_far();
  const std::vector<pid_t> ranks = ready_pids(launcher.stdout_so_far());
  ASSERT_EQ(ranks.size(), 2u);
  ::kill(ranks[0], SIGTERM);  // rank 0 first: rank 1 runs on, so a replacement would be due
  EXPECT_TRUE(reaped_within(ranks[0], seconds(20)));
  ::kill(ranks[1], SIGTERM);
  launcher.send_signal(SIGTERM);
  const Finished f = launcher.finish(seconds(60));
  ASSERT_FALSE(f.timed_out) << f.err;
  EXPECT_EQ(exit_code(f), 128 + SIGTERM) << f.err;
  EXPECT_FALSE(contains(f.err, "replacement")) << f.err;
  EXPECT_FALSE(contains(f.err, ") failed")) << f.err;
  EXPECT_TRUE(contains(f.err, "launch: the job was stopped by SIGTERM sent to the launcher from outside")) << f.err;
  EXPECT_TRUE(no_orphan_running());
}

// Only the ranks got SIGTERM (`pkill -TERM -f the_program`): the launcher, which sent none and
// got none, says they were terminated from outside it (it said "failed first (signal SIGTERM
// (Terminated))", as if the program had failed).
TEST(OutsideStop, RanksTerminatedFromOutsideTheLauncherAreSaidToBe) {
  const Finished f = ranks_then_launcher({}, /*launcher_too=*/false);
  ASSERT_FALSE(f.timed_out) << f.err;
  EXPECT_EQ(exit_code(f), 128 + SIGTERM) << f.err;
  EXPECT_TRUE(contains(f.err, "was terminated first (signal SIGTERM (Terminated) from outside the launcher (it sent "
                              "none))"))
      << f.err;
  EXPECT_FALSE(contains(f.err, "the job was stopped by")) << f.err;
  EXPECT_TRUE(no_orphan_running());
}


// An elastic job (two launchers, --nnodes=1:2, restarts allowed) that a scheduler stops:
// machine b's launcher gets SIGTERM first, ends the round ("left: interrupted (SIGTERM)"),
// and machine a's gets its own a moment later, once a has stopped its ranks. a starts no
// new round for the few ranks left (it did: "round 2: 1 machine", its ranks started only
// to be stopped), and says it was stopped from outside.
TEST(OutsideStop, AnElasticJobStoppedMachineByMachineStartsNoNewRound) {
  const int port = local::pick_free_port();
  const std::vector<std::string> args =
      launch({"--nnodes=1:2", "--nproc_per_node=1", "--rdzv_endpoint=127.0.0.1:" + std::to_string(port),
              "--rdzv_id=outside_stop", "--rdzv_last_call_s=30", "--max_restarts=3"},
             {rank_probe_path(), "wait"});
  const std::vector<std::string> env = {"DISTCOMM_STORE_TOKEN=outside-stop-test"};
  Subprocess a(args, env, /*merge_stderr=*/true);
  ASSERT_TRUE(distcomm::testing::accepts_connections(port, seconds(30)));  // a serves the rendezvous store
  Subprocess b(args, env, /*merge_stderr=*/true);
  ASSERT_TRUE(a.wait_for_stdout("ready ", 1, seconds(60))) << a.stdout_so_far();
  ASSERT_TRUE(b.wait_for_stdout("ready ", 1, seconds(60))) << b.stdout_so_far();
  const std::vector<pid_t> a_ranks = ready_pids(a.stdout_so_far());
  ASSERT_EQ(a_ranks.size(), 1u) << a.stdout_so_far();
  b.send_signal(SIGTERM);
  const Finished fb = b.finish(seconds(60));
  EXPECT_EQ(exit_code(fb), 128 + SIGTERM) << fb.out;
  // a ends its round for b's leaving and stops its rank; once that is reaped (its attempt
  // is over within moments), a gets the scheduler's SIGTERM: the skew between two machines.
  ASSERT_TRUE(a.wait_for_stdout("left: interrupted (SIGTERM)", 1, seconds(60))) << a.stdout_so_far();
  EXPECT_TRUE(reaped_within(a_ranks[0], seconds(20)));
  std::this_thread::sleep_for(milliseconds(300));
  a.send_signal(SIGTERM);
  const Finished fa = a.finish(seconds(60));
  EXPECT_EQ(exit_code(fa), 128 + SIGTERM) << fa.out;
  EXPECT_FALSE(contains(fa.out, "round 2: ")) << fa.out;
  EXPECT_TRUE(contains(fa.out, "this launcher got SIGTERM too: the job was stopped from outside, not by a failure; no "
                               "new round"))
      << fa.out;
  EXPECT_TRUE(no_orphan_running());
}

// A static job of two machines (--nnodes=2) of which only machine 1 is stopped from outside
// (its pod evicted): its launcher gets SIGTERM and stops its rank. Machine 0's rank then
// loses its peer and fails; machine 0's launcher names machine 1's stop as the job's first
// failure, and its rank names the lost rank as stopped by its launcher, not as the culprit
// (it said "rank 0 (local rank 0, pid N) failed first (exit code 1): ... rank 1 closed its
// connection (the process died or exited)").
TEST(OutsideStop, AnotherMachineStoppedFromOutsideIsNamedAsTheCause) {
  const std::string port = std::to_string(local::pick_free_port());
  auto node = [&](int node_rank) {
    return launch({"--nnodes=2", "--node_rank=" + std::to_string(node_rank), "--nproc_per_node=1",
                   "--master_port=" + port},
                  // Its finish file never comes: the ranks run until stopped or failed.
                  {runfile("tests/tools/launch/elastic_probe"), temp_path("outside_stop_never")});
  };
  auto env = [&](int node_rank) {
    return std::vector<std::string>{"DISTCOMM_RUN_ID=outside_stop_two", "DISTCOMM_STORE_TOKEN=secret",
                                    "DISTCOMM_HOST_ID=outside_stop_node" + std::to_string(node_rank)};
  };
  Subprocess node0(node(0), env(0));
  Subprocess node1(node(1), env(1));
  // Both ranks in the group ("joined rank R of 2"), then machine 1 is stopped.
  ASSERT_TRUE(node0.wait_for_stdout("joined rank 0 of 2", 1, seconds(60))) << node0.stdout_so_far();
  ASSERT_TRUE(node1.wait_for_stdout("joined rank 1 of 2", 1, seconds(60))) << node1.stdout_so_far();
  node1.send_signal(SIGTERM);
  const Finished f1 = node1.finish(seconds(60));
  const Finished f0 = node0.finish(seconds(90));
  ASSERT_FALSE(f0.timed_out) << f0.err;
  EXPECT_EQ(exit_code(f1), 128 + SIGTERM);
  EXPECT_TRUE(contains(f0.err, "the job's first failure was on node 1 (its launcher saw it): node 1's launcher got "
                               "SIGTERM from outside"))
      << f0.err;
  EXPECT_TRUE(contains(f0.err, "rank 1 was stopped by its launcher after it got SIGTERM from outside")) << f0.err;
  EXPECT_TRUE(no_orphan_running());
}

std::string last_line_of(const std::string& text) {
  const std::vector<std::string> lines = lines_of(text);
  return lines.empty() ? "" : lines.back();
}

// This process as a signal's sender names it: "pid 7 (outside_stop_te, uid 1000)".
std::string me_as_sender() {
  std::ifstream in("/proc/self/comm");
  std::string comm;
  std::getline(in, comm);
  return "pid " + std::to_string(::getpid()) + " (" + comm + ", uid " + std::to_string(::getuid()) + ")";
}

// The launcher says who sent its signal (siginfo_t's si_pid and si_uid, the command from
// /proc/<pid>/comm) in the stop's last line (it said only "from outside (...)").
TEST(OutsideStop, TheLauncherNamesWhoSentItsSignal) {
  Subprocess launcher(launch({"--nproc_per_node=1", "--grace_period_s=5"}, {rank_probe_path(), "wait"}));
  ASSERT_TRUE(launcher.wait_for_stdout("ready ", 1, seconds(30))) << launcher.stdout_so_far();
  launcher.send_signal(SIGTERM);
  const Finished f = launcher.finish(seconds(60));
  ASSERT_FALSE(f.timed_out) << f.err;
  EXPECT_EQ(exit_code(f), 128 + SIGTERM) << f.err;
  EXPECT_TRUE(contains(f.err, "launch: got SIGTERM: stopping 1 rank (SIGTERM")) << f.err;
  EXPECT_TRUE(contains(last_line_of(f.err), "launch: the job was stopped by SIGTERM sent to the launcher from outside "
                                            "(a scheduler's cancel, preemption or eviction, or a kill) by " +
                                                me_as_sender() + ", not by a failure"))
      << f.err;
  EXPECT_TRUE(no_orphan_running());
}

// "ready <pid> <rank>" lines of the shell ranks below: pid by rank.
std::map<int, pid_t> ready_ranks(const std::string& out) {
  std::map<int, pid_t> pids;
  for (size_t at = out.find("ready "); at != std::string::npos; at = out.find("ready ", at + 1)) {
    std::istringstream line(out.substr(at + 6));
    pid_t pid = -1;
    int rank = -1;
    if (line >> pid >> rank) pids[rank] = pid;
  }
  return pids;
}

// Two ranks with handlers of SIGTERM (a graceful checkpoint-and-exit): rank 0 exits with
// `code` at once, rank 1 takes 2 s. The scheduler's SIGTERM reaches rank 0 first, and the
// launcher once rank 0 has been reaped (the order certain; with `after_line`, once the
// launcher has said that line too), while rank 1 still runs. Output and errors merged (out).
Finished graceful_rank_then_launcher(int code, const std::string& after_line = "") {
  const std::string script = "if [ \"$RANK\" = 0 ]; then trap 'exit " + std::to_string(code) +
                             "' TERM; else trap 'sleep 2; exit 0' TERM; fi; echo ready $$ $RANK; "
                             "while :; do sleep 0.05; done";
  Subprocess launcher(launch({"--nproc_per_node=2", "--grace_period_s=20"}, {"/bin/sh", "-c", script}), {},
                      /*merge_stderr=*/true);
  if (!launcher.wait_for_stdout("ready ", 2, seconds(30))) return launcher.finish(seconds(1));
  const std::map<int, pid_t> ranks = ready_ranks(launcher.stdout_so_far());
  EXPECT_EQ(ranks.size(), 2u) << launcher.stdout_so_far();
  if (ranks.count(0) == 0) return launcher.finish(seconds(1));
  ::kill(ranks.at(0), SIGTERM);
  EXPECT_TRUE(reaped_within(ranks.at(0), seconds(20)));
  if (!after_line.empty()) {
    EXPECT_TRUE(launcher.wait_for_stdout(after_line, 1, seconds(20))) << launcher.stdout_so_far();
  }
  launcher.send_signal(SIGTERM);
  return launcher.finish(seconds(60));
}

// A rank that exits 143 (128 + SIGTERM) from its own handler, just before the launcher's
// own SIGTERM, is part of the stop: no rank is named as failed (it said "rank 0 (local rank
// 0, pid N) failed: exit code 143", then killed rank 1 as if the SIGTERM were impatience).
TEST(OutsideStop, ARankThatExits143OnItsOwnHandlerIsPartOfTheStop) {
  const Finished f = graceful_rank_then_launcher(143);
  ASSERT_FALSE(f.timed_out) << f.out;
  EXPECT_EQ(exit_code(f), 128 + SIGTERM) << f.out;
  EXPECT_FALSE(contains(f.out, ") failed")) << f.out;
  EXPECT_FALSE(contains(f.out, "still running: SIGKILL")) << f.out;
  const std::string last = last_line_of(f.out);
  EXPECT_TRUE(contains(last, "launch: the job was stopped by SIGTERM sent to the launcher")) << f.out;
  EXPECT_TRUE(contains(last, "no rank failed on its own; rank 0 (exit code 143) ended on its own as the signal came"))
      << f.out;
  EXPECT_TRUE(contains(last, "rank 1 was stopped by the launcher; exit status 143")) << f.out;
  EXPECT_TRUE(no_orphan_running());
}

// A rank that exits with a code of its own (7), then the launcher's SIGTERM: a real failure
// that someone stopped the job after (a user's kill, srun -K ending the job because of it)
// looks the same as a handler's odd exit code, and a failure must never be hidden. Only
// 128 + a stopping signal is taken for the stop's (above). (e258281 read this "not a
// failure", exit 143; the review found it.)
TEST(OutsideStop, AFailureIsNotHiddenByTheLaunchersSigtermThatFollowsIt) {
  const Finished f = graceful_rank_then_launcher(7, "launch: rank 0 failed: stopping 1 rank");
  ASSERT_FALSE(f.timed_out) << f.out;
  EXPECT_EQ(exit_code(f), 7) << f.out;
  EXPECT_TRUE(contains(f.out, ") failed first (exit code 7)")) << f.out;
  EXPECT_FALSE(contains(f.out, "not by a failure")) << f.out;
  EXPECT_FALSE(contains(f.out, "part of the stop")) << f.out;
  EXPECT_TRUE(no_orphan_running());
}

// Under --on_failure=continue the failure was said as it came; a SIGTERM 1 s later stops the
// job, and its last line keeps that rank as failed before the stop.
TEST(OutsideStop, AFailureUnderOnFailureContinueStaysAFailureInTheStopsLine) {
  const std::string script = "if [ \"$RANK\" = 0 ]; then exit 7; fi; echo ready $$ $RANK; while :; do sleep 0.05; done";
  Subprocess launcher(launch({"--nproc_per_node=2", "--grace_period_s=5", "--on_failure=continue"},
                             {"/bin/sh", "-c", script}),
                      {}, /*merge_stderr=*/true);
  ASSERT_TRUE(launcher.wait_for_stdout("runs on (--on_failure=continue)", 1, seconds(30))) << launcher.stdout_so_far();
  std::this_thread::sleep_for(milliseconds(300));  // a later signal, as a user's kill comes
  launcher.send_signal(SIGTERM);
  const Finished f = launcher.finish(seconds(60));
  ASSERT_FALSE(f.timed_out) << f.out;
  const std::string last = last_line_of(f.out);
  EXPECT_FALSE(contains(last, "ended on its own as the signal came")) << f.out;
  EXPECT_TRUE(contains(last, "rank 0 (exit code 7) had failed")) << f.out;
  EXPECT_TRUE(no_orphan_running());
}

// With no signal to the launcher, a rank's exit with a code stays its failure.
TEST(OutsideStop, ARankThatExitsWithACodeAloneStillFailed) {
  const std::string script = "if [ \"$RANK\" = 0 ]; then exit 7; fi; while :; do sleep 0.05; done";
  Subprocess launcher(launch({"--nproc_per_node=2", "--grace_period_s=5"}, {"/bin/sh", "-c", script}));
  const Finished f = launcher.finish(seconds(60));
  ASSERT_FALSE(f.timed_out) << f.err;
  EXPECT_EQ(exit_code(f), 7) << f.err;
  EXPECT_TRUE(contains(f.err, ") failed first (exit code 7)")) << f.err;
  EXPECT_FALSE(contains(f.err, "the job was stopped by")) << f.err;
}

// Until every thread of `pid` is stopped (state T): a SIGSTOP takes effect as each thread is
// next scheduled, not as kill() returns.
bool stopped_within(pid_t pid, milliseconds deadline) {
  const auto until = std::chrono::steady_clock::now() + deadline;
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  for (;;) {
    bool all = true;
    bool any = false;
    for (const std::string& tid : entries_of(tasks)) {
      std::ifstream in(tasks + "/" + tid + "/stat");
      std::string stat;
      std::getline(in, stat);
      const size_t close = stat.rfind(')');
      if (close == std::string::npos || close + 2 >= stat.size()) continue;  // gone meanwhile
      any = true;
      all = all && (stat[close + 2] == 'T' || stat[close + 2] == 't');
    }
    if (any && all) return true;
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(milliseconds(5));
  }
}

// A rank dead but not yet reaped as the launcher stops the ranks is not counted among those
// it stops (it said "stopping 1 rank" of a rank gone). Node 1's launcher gets SIGTERM with
// its rank, whose handler exits 0.7 s later; node 0's launcher is frozen (SIGSTOP), so node
// 1's note on the job's board waits out its 1.5 s bound, and the rank has died meanwhile.
TEST(OutsideStop, RanksThatEndedBeforeTheStopAreNotCountedAsStopped) {
  const std::string port = std::to_string(local::pick_free_port());
  auto node = [&](int node_rank, const std::string& script) {
    return launch({"--nnodes=2", "--node_rank=" + std::to_string(node_rank), "--nproc_per_node=1",
                   "--master_port=" + port, "--grace_period_s=5"},
                  {"/bin/sh", "-c", script});
  };
  const std::vector<std::string> env = {"DISTCOMM_RUN_ID=outside_stop_count", "DISTCOMM_STORE_TOKEN=secret"};
  Subprocess node0(node(0, "echo ready $$ $RANK; while :; do sleep 0.05; done"), env);
  Subprocess node1(node(1, "trap 'sleep 0.7; exit 0' TERM; echo ready $$ $RANK; while :; do sleep 0.05; done"), env);
  ASSERT_TRUE(node0.wait_for_stdout("ready ", 1, seconds(60))) << node0.stdout_so_far();
  ASSERT_TRUE(node1.wait_for_stdout("ready ", 1, seconds(60))) << node1.stdout_so_far();
  const std::map<int, pid_t> ranks = ready_ranks(node1.stdout_so_far());
  ASSERT_EQ(ranks.count(1), 1u) << node1.stdout_so_far();
  node0.send_signal(SIGSTOP);
  EXPECT_TRUE(stopped_within(node0.pid(), seconds(20)));
  ::kill(ranks.at(1), SIGTERM);  // a scheduler's SIGTERM to the machine's processes
  node1.send_signal(SIGTERM);
  const Finished f1 = node1.finish(seconds(60));
  node0.send_signal(SIGCONT);
  node0.send_signal(SIGTERM);
  const Finished f0 = node0.finish(seconds(60));
  ASSERT_FALSE(f1.timed_out) << f1.err;
  EXPECT_EQ(exit_code(f1), 128 + SIGTERM) << f1.err;
  // The note's wait held the launcher's loop: the rank had ended by the stop.
  EXPECT_TRUE(contains(f1.err, "cannot leave in the job's store that this machine's launcher was stopped")) << f1.err;
  EXPECT_FALSE(contains(f1.err, "stopping 1 rank")) << f1.err;
  EXPECT_TRUE(contains(f1.err, ": no rank left to stop (1 had already ended)")) << f1.err;
  (void)f0;
  EXPECT_TRUE(no_orphan_running());
}

// The hold's rules, without processes.
local::Child ended_by(int sig, bool stopped_by_launcher) {
  local::Child c;
  c.running = false;
  c.stopped = stopped_by_launcher;
  c.status = sig;  // a waitpid status for "ended by signal sig", no core
  return c;
}

TEST(OutsideStop, OnlyAStoppingSignalTheLauncherDidNotSendIsHeld) {
  EXPECT_TRUE(launch::ended_by_outside_stop(ended_by(SIGTERM, false)));
  EXPECT_TRUE(launch::ended_by_outside_stop(ended_by(SIGINT, false)));
  EXPECT_FALSE(launch::ended_by_outside_stop(ended_by(SIGTERM, true)));   // the launcher's stop
  EXPECT_FALSE(launch::ended_by_outside_stop(ended_by(SIGKILL, false)));  // no grace: a failure
  EXPECT_FALSE(launch::ended_by_outside_stop(ended_by(SIGSEGV, false)));
  local::Child exited;
  exited.running = false;
  exited.status = 1 << 8;  // exit code 1
  EXPECT_FALSE(launch::ended_by_outside_stop(exited));

  launch::OutsideStopHold hold;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(hold.holds(ended_by(SIGSEGV, false), t0));
  EXPECT_TRUE(hold.holds(ended_by(SIGTERM, false), t0));
  EXPECT_TRUE(hold.holds(ended_by(SIGTERM, false), t0 + launch::kOutsideStopHold - milliseconds(1)));
  EXPECT_FALSE(hold.holds(ended_by(SIGTERM, false), t0 + launch::kOutsideStopHold));
  EXPECT_FALSE(hold.until().has_value());  // over: the failure is reported

  // An exit with 128 + a stopping signal's number: a rank's own handler of it.
  local::Child graceful;
  graceful.running = false;
  graceful.status = 143 << 8;
  EXPECT_TRUE(launch::exited_as_if_stopped(graceful));
  EXPECT_TRUE(launch::OutsideStopHold().holds(graceful, t0));
  graceful.status = 137 << 8;  // 128 + SIGKILL: no handler could have caught it
  EXPECT_FALSE(launch::exited_as_if_stopped(graceful));
  EXPECT_FALSE(launch::OutsideStopHold().holds(exited, t0));
}

TEST(OutsideStop, ExitsByAnOutsideSignalWaitOutTheHoldUnderContinue) {
  launch::OutsideStopHold hold;
  const auto t0 = std::chrono::steady_clock::now();
  auto outside = [](size_t i) { return i == 0 || i == 2; };
  EXPECT_EQ(hold.pass({0, 1}, outside, t0), std::vector<size_t>({1}));
  EXPECT_EQ(hold.pass({2}, outside, t0 + milliseconds(10)), std::vector<size_t>());
  EXPECT_EQ(hold.pass({}, outside, t0 + launch::kOutsideStopHold), std::vector<size_t>({0, 2}));
  EXPECT_EQ(hold.pass({2}, outside, t0 + launch::kOutsideStopHold), std::vector<size_t>({2}));
}

TEST(OutsideStop, TheJobsStopAndItsSenderReadBack) {
  const auto stop = launch::decode_job_stop(launch::encode_job_stop(SIGINT, "node 0's launcher got SIGINT\nmore"));
  ASSERT_TRUE(stop.has_value());
  EXPECT_EQ(stop->first, SIGINT);
  EXPECT_EQ(stop->second, "node 0's launcher got SIGINT\nmore");
  EXPECT_FALSE(launch::decode_job_stop("distcomm-launcher-failure-1\n1\n0\n-1\n0\nx").has_value());
  EXPECT_EQ(launch::sender_text(launch::SignalSender{0, 0, "", SI_KERNEL}), "the kernel (a terminal's Ctrl-C or hangup)");
  // kill() from outside the launcher's PID namespace (a container runtime) also has pid 0,
  // with SI_USER: no terminal (the review of e258281 saw it called a Ctrl-C).
  EXPECT_EQ(launch::sender_text(launch::SignalSender{0, 0, "", SI_USER}),
            "a process outside this PID namespace (a container runtime: a pod's deletion or eviction, docker stop)");
  EXPECT_TRUE(launch::from_terminal(launch::SignalSender{0, 0, "", SI_KERNEL}));
  EXPECT_FALSE(launch::from_terminal(launch::SignalSender{0, 0, "", SI_USER}));
  EXPECT_FALSE(launch::from_terminal(launch::SignalSender{123, 0, "bash", SI_USER}));
  EXPECT_EQ(launch::sender_text(launch::SignalSender{123, 0, "slurmstepd"}), "pid 123 (slurmstepd, uid 0)");
  EXPECT_EQ(launch::sender_text(launch::SignalSender{123, 1000, ""}), "pid 123 (uid 1000)");
  EXPECT_EQ(launch::stopped_elsewhere_text(SIGTERM, "node 0's launcher got SIGTERM", {}, {2, 3}, {}),
            "the job was stopped on node 0: node 0's launcher got SIGTERM, not by a failure: no rank failed on its "
            "own; ranks 2, 3 were stopped by this machine's launcher; exit status 143 (128 + 15)");
}

TEST(OutsideStop, TheLineSaysWhoGotTheSignalAndWhoFailedBefore) {
  EXPECT_EQ(launch::stopped_from_outside_text(SIGTERM, {0}, {1, 2}, {}),
            "the job was stopped by SIGTERM sent to the launcher from outside (a scheduler's cancel, preemption or "
            "eviction, or a kill), not by a failure: no rank failed on its own; rank 0 got SIGTERM from outside too; "
            "ranks 1, 2 were stopped by the launcher; exit status 143 (128 + 15)");
  EXPECT_TRUE(contains(launch::stopped_from_outside_text(SIGINT, {}, {0}, {"rank 3 (exit code 1)"}),
                       "the job was stopped by SIGINT sent to the launcher (a Ctrl-C, or a kill from outside); before "
                       "it rank 3 (exit code 1) had failed; rank 0 was stopped by the launcher; exit status 130"));
}

}  // namespace
}  // namespace testing
}  // namespace distcomm
