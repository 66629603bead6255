// One machine of an elastic job leaves by a signal to its launcher, which stops its ranks,
// ends the round and leaves. What the others do is decided on the round end's cause
// (launch/round_end.h), never on its words: after a signal that may be the whole job's
// (SIGTERM from a scheduler; a SIGINT sent with kill, as scancel --signal=INT or srun
// forwarding a Ctrl-C send it to every machine) they wait 1.5 s for their own first and say
// so when none comes; only a Ctrl-C at that machine's own terminal (sent by the kernel,
// round_end_test) removes it without a wait, and counts no restart: a membership change, so
// the others go on under --max_restarts=0 too. The review of aba3a81 found a job stopped with
// SIGINT on every machine, 0.3 s apart, starting a new round at once, only to stop it.
// Three real launchers on loopback stand for the machines (--nnodes=1:3), their ranks
// rank_probe.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "api/process/local_processes.h"
#include "tests/testing/port_wait.h"
#include "tests/tools/launch/launcher_harness.h"

namespace distcomm {
namespace testing {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::seconds;

const auto* const kAdoptOrphans = ::testing::AddGlobalTestEnvironment(new AdoptOrphans);

const std::vector<std::string> kEnv = {"DISTCOMM_STORE_TOKEN=deliberate-departure-test"};

struct ThreeMachines {
  std::unique_ptr<Subprocess> a, b, c;  // a serves the rendezvous store: c is the one that leaves
};

// Three launchers, each with one rank running (its "ready" line said) in round 1; c's with
// a terminal of its own (terminal_run) where `c_at_terminal`.
void start_three(ThreeMachines& m, const std::string& rdzv_id, bool c_at_terminal = false, int max_restarts = 3) {
  const int port = local::pick_free_port();
  const std::vector<std::string> args =
      launch({"--nnodes=1:3", "--nproc_per_node=1", "--rdzv_endpoint=127.0.0.1:" + std::to_string(port),
              "--rdzv_id=" + rdzv_id, "--rdzv_last_call_s=30", "--max_restarts=" + std::to_string(max_restarts)},
             {rank_probe_path(), "wait"});
  m.a = std::make_unique<Subprocess>(args, kEnv, /*merge_stderr=*/true);
  ASSERT_TRUE(accepts_connections(port, seconds(30)));
  m.b = std::make_unique<Subprocess>(args, kEnv, /*merge_stderr=*/true);
  std::vector<std::string> c_args = args;
  if (c_at_terminal) c_args.insert(c_args.begin(), runfile("tests/tools/launch/terminal_run"));
  m.c = std::make_unique<Subprocess>(c_args, kEnv, /*merge_stderr=*/true);
  for (Subprocess* p : {m.a.get(), m.b.get(), m.c.get()}) {
    ASSERT_TRUE(p->wait_for_stdout("round 1: 3 machines (min 1, max 3)", 1, seconds(60))) << p->stdout_so_far();
    ASSERT_TRUE(p->wait_for_stdout("ready ", 1, seconds(60))) << p->stdout_so_far();
  }
}

// Signals c (at_terminal: a Ctrl-C typed at c's terminal, which the kernel turns into
// SIGINT); returns how long until both survivors' round-2 ranks said "ready".
Clock::duration remove_c(ThreeMachines& m, int sig, bool at_terminal = false) {
  const Clock::time_point sent = Clock::now();
  m.c->send_signal(at_terminal ? SIGUSR1 : sig);
  const Finished fc = m.c->finish(seconds(30));
  EXPECT_EQ(exit_code(fc), 128 + sig) << fc.out;
  for (Subprocess* p : {m.a.get(), m.b.get()}) {
    EXPECT_TRUE(p->wait_for_stdout("round 2: 2 machines (min 1, max 3)", 1, seconds(60))) << p->stdout_so_far();
    EXPECT_TRUE(p->wait_for_stdout("ready ", 2, seconds(60))) << p->stdout_so_far();
  }
  return Clock::now() - sent;
}

// The survivors end with a Ctrl-C of their own.
std::vector<Finished> stop_survivors(ThreeMachines& m) {
  m.a->send_signal(SIGINT);
  m.b->send_signal(SIGINT);
  std::vector<Finished> done = {m.a->finish(seconds(60)), m.b->finish(seconds(60))};
  for (const Finished& f : done) EXPECT_FALSE(f.timed_out) << f.out;
  return done;
}

double seconds_of(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// A Ctrl-C at one machine's terminal reaches that machine alone: the others start the next
// round at once and say that it was removed on purpose.
TEST(DeliberateDeparture, ACtrlCAtOneMachinesTerminalStartsTheNextRoundWithoutWaiting) {
  ThreeMachines m;
  ASSERT_NO_FATAL_FAILURE(start_three(m, "ctrl_c_no_wait", /*c_at_terminal=*/true));
  const Clock::duration took = remove_c(m, SIGINT, /*at_terminal=*/true);
  const std::vector<Finished> survivors = stop_survivors(m);
  std::printf("Ctrl-C at one launcher's terminal -> both survivors' round-2 ranks ready: %.2f s\n", seconds_of(took));
  for (const Finished& f : survivors) {
    EXPECT_NE(f.out.find("launch: rendezvous 'ctrl_c_no_wait' round 1: a machine was removed on purpose (its launcher "
                         "got SIGINT): the next round forms without waiting\n"),
              std::string::npos)
        << f.out;
    EXPECT_EQ(f.out.find(" of this launcher's own (a scheduler"), std::string::npos) << f.out;
    EXPECT_NE(f.out.find(") left: interrupted (SIGINT)"), std::string::npos) << f.out;
    // A membership change, not a failure: no restart counted.
    EXPECT_EQ(f.out.find("; restart 1 of 3"), std::string::npos) << f.out;
  }
  // Generous: the machine is shared and noisy. The log lines above tell the wait apart.
  EXPECT_LT(took, seconds(20));
  EXPECT_TRUE(no_orphan_running());
}

// Under --max_restarts=0 too: a machine removed on purpose uses up no restart, so the others
// form the next round (torchrun does not count membership changes against max_restarts
// either). They ended with "gave up (--max_restarts=0)", counting it a failure.
TEST(DeliberateDeparture, ACtrlCAtOneMachinesTerminalCountsNoRestartUnderMaxRestartsZero) {
  ThreeMachines m;
  ASSERT_NO_FATAL_FAILURE(start_three(m, "ctrl_c_no_restarts", /*c_at_terminal=*/true, /*max_restarts=*/0));
  remove_c(m, SIGINT, /*at_terminal=*/true);
  const std::vector<Finished> survivors = stop_survivors(m);
  for (const Finished& f : survivors) {
    EXPECT_EQ(exit_code(f), 128 + SIGINT) << f.out;
    EXPECT_NE(f.out.find("launch: rendezvous 'ctrl_c_no_restarts' round 1: a machine was removed on purpose"),
              std::string::npos)
        << f.out;
    EXPECT_EQ(f.out.find("gave up"), std::string::npos) << f.out;
    EXPECT_NE(f.out.find("launch: rendezvous 'ctrl_c_no_restarts' round 2: 2 machines"), std::string::npos) << f.out;
  }
  EXPECT_TRUE(no_orphan_running());
}

// One machine's launcher gets `sig` sent with kill: the others hold for their own, say so
// when none comes, and go on; the words for people are as they were.
void expect_the_others_held(int sig, const std::string& rdzv_id) {
  const std::string name = local::signal_name(sig);
  ThreeMachines m;
  ASSERT_NO_FATAL_FAILURE(start_three(m, rdzv_id));
  const Clock::duration took = remove_c(m, sig);
  const std::vector<Finished> survivors = stop_survivors(m);
  std::printf("%s (kill) to one launcher -> both survivors' round-2 ranks ready: %.2f s\n", name.c_str(),
              seconds_of(took));
  for (const Finished& f : survivors) {
    EXPECT_NE(f.out.find("launch: rendezvous '" + rdzv_id + "' round 1: waited 1.5 s for a " + name +
                         " of this launcher's own (a scheduler stopping the job signals every machine); none came\n"),
              std::string::npos)
        << f.out;
    EXPECT_EQ(f.out.find("removed on purpose"), std::string::npos) << f.out;
    EXPECT_NE(f.out.find(") left: interrupted (" + name + ")"), std::string::npos) << f.out;
  }
  EXPECT_GE(took, std::chrono::milliseconds(1500));
  EXPECT_LT(took, seconds(30));
  EXPECT_TRUE(no_orphan_running());
}

// A SIGINT sent with kill (what scancel --signal=INT and srun send every machine) may be the
// whole job's, as SIGTERM is.
TEST(DeliberateDeparture, ASigintSentWithKillHoldsTheOthersAMomentThenTheyGoOn) {
  expect_the_others_held(SIGINT, "sigint_hold");
}

// SIGTERM is what a scheduler sends every machine of a job it stops: the survivors wait a
// moment for theirs (none comes here), say so, and go on.
TEST(DeliberateDeparture, ASigtermOnOneMachineHoldsTheOthersAMomentThenTheyGoOn) {
  expect_the_others_held(SIGTERM, "sigterm_hold");
}

}  // namespace
}  // namespace testing
}  // namespace distcomm
