// One machine of an elastic job leaves by a signal to its launcher, which stops its ranks,
// ends the round and leaves. What the others do is decided on the round end's cause
// (launch/round_end.h), never on its words: after a signal that may be the whole job's
// (SIGTERM from a scheduler; a SIGINT sent with kill, as scancel --signal=INT or srun
// forwarding a Ctrl-C send it to every machine) they wait 1.5 s for their own first and say
// so when none comes; only a Ctrl-C at that machine's own terminal (sent by the kernel,
// round_end_test) removes it without a wait, and counts no restart: a membership change, so
// the others go on under --max_restarts=0 too. The review of aba3a81 found a job stopped with
// SIGINT on every machine, 0.3 s apart, starting a new round at once, only to stop it.
// The launcher serving the rendezvous store cannot leave alone (the store goes with it):
// its signal stops the job on every machine, each saying so in one line.
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
  int port = 0;                         // the rendezvous endpoint's
};

// Three launchers, each with one rank running (its "ready" line said) in round 1; c's with
// a terminal of its own (terminal_run) where `c_at_terminal`, a's where `a_at_terminal`.
void start_three(ThreeMachines& m, const std::string& rdzv_id, bool c_at_terminal = false, int max_restarts = 3,
                 bool a_at_terminal = false) {
  const int port = local::pick_free_port();
  m.port = port;
  const std::vector<std::string> args =
      launch({"--nnodes=1:3", "--nproc_per_node=1", "--rdzv_endpoint=127.0.0.1:" + std::to_string(port),
              "--rdzv_id=" + rdzv_id, "--rdzv_last_call_s=30", "--max_restarts=" + std::to_string(max_restarts)},
             {rank_probe_path(), "wait"});
  std::vector<std::string> a_args = args;
  if (a_at_terminal) a_args.insert(a_args.begin(), runfile("tests/tools/launch/terminal_run"));
  m.a = std::make_unique<Subprocess>(a_args, kEnv, /*merge_stderr=*/true);
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

// The launcher serving the rendezvous store (a, the endpoint's host) is stopped: at its
// terminal (a Ctrl-C), or by `sig` sent with kill. It cannot leave the job alone: the store
// goes with it. After a Ctrl-C it said "the next round forms without waiting" and left, and
// the others, their store gone, ended with exit 1 and "lost the rendezvous store"; after a
// SIGTERM they waited for their own, then lost the store the same way. Now the job stops on
// every machine: a keeps the store until the others have read the stop, and says why the
// whole job stopped and how to remove machines on purpose instead; each other launcher ends
// with one line naming that stop, with a's exit code (128 + the signal).
void expect_the_store_hosts_stop_to_stop_the_job(int sig, bool at_terminal, const std::string& rdzv_id,
                                                 const std::string& stopped, const std::string& stopper) {
  ThreeMachines m;
  ASSERT_NO_FATAL_FAILURE(start_three(m, rdzv_id, /*c_at_terminal=*/false, /*max_restarts=*/3, at_terminal));
  m.a->send_signal(at_terminal ? SIGUSR1 : sig);  // SIGUSR1: a Ctrl-C typed at a's terminal
  const Finished fa = m.a->finish(seconds(60));
  const Finished fb = m.b->finish(seconds(60));
  const Finished fc = m.c->finish(seconds(60));
  const std::string code = std::to_string(128 + sig) + " (128 + " + std::to_string(sig) + ")";
  EXPECT_EQ(exit_code(fa), 128 + sig) << fa.out;
  EXPECT_NE(fa.out.find("launch: this machine's launcher serves the job's rendezvous store (--rdzv_endpoint=127.0.0.1:" +
                        std::to_string(m.port) + "), so " + stopper +
                        " stops the job on every machine: told the other machines' launchers: node 1 read it; node 2 "
                        "read it" +
                        // How to remove machines instead: after a Ctrl-C only, a user's.
                        (at_terminal ? "; to remove machines on purpose, serve the store from a machine that stays "
                                       "(every launcher's --rdzv_endpoint pointing at it) and press Ctrl-C at the "
                                       "terminals of those that leave"
                                     : "") +
                        "; exit status " + code + "\n"),
            std::string::npos)
      << fa.out;
  EXPECT_EQ(fa.out.find("forms without waiting"), std::string::npos) << fa.out;
  for (const Finished* f : {&fb, &fc}) {
    EXPECT_FALSE(f->timed_out) << f->out;
    EXPECT_EQ(exit_code(*f), 128 + sig) << f->out;
    const std::string stop = "launch: the job was stopped " + stopped +
                             ", which served the job's store: its launcher got " +
                             (at_terminal ? "SIGINT (a Ctrl-C there)" : local::signal_name(sig)) +
                             ", and the rendezvous store ends with it; rendezvous '" + rdzv_id +
                             "' round 1 ended, no new round; exit status " + code + "\n";
    // One line, the launcher's last, and nothing of a lost store, a wait or a next round.
    const size_t at = f->out.find(stop);
    EXPECT_NE(at, std::string::npos) << f->out;
    if (at != std::string::npos) {
      EXPECT_EQ(f->out.find("\nlaunch: ", at + stop.size() - 1), std::string::npos) << f->out;
    }
    EXPECT_EQ(f->out.find("lost the rendezvous store"), std::string::npos) << f->out;
    EXPECT_EQ(f->out.find("forms without waiting"), std::string::npos) << f->out;
    EXPECT_EQ(f->out.find(" of this launcher's own (a scheduler"), std::string::npos) << f->out;
    EXPECT_EQ(f->out.find("round 2"), std::string::npos) << f->out;
  }
  EXPECT_TRUE(no_orphan_running());
}

TEST(DeliberateDeparture, ACtrlCAtTheStoreHostsTerminalStopsTheJobOnEveryMachine) {
  expect_the_store_hosts_stop_to_stop_the_job(SIGINT, /*at_terminal=*/true, "ctrl_c_store_host",
                                              "at node 0's terminal (127.0.0.1)", "a Ctrl-C here");
}

// Sent with kill (a preemption of that machine alone, say): the store goes all the same.
TEST(DeliberateDeparture, ASigtermToTheStoreHostStopsTheJobOnEveryMachine) {
  expect_the_store_hosts_stop_to_stop_the_job(SIGTERM, /*at_terminal=*/false, "sigterm_store_host",
                                              "on node 0 (127.0.0.1)", "its SIGTERM");
}

// While the launchers wait for machines (--nnodes=3 and two came): a Ctrl-C at the store
// host's terminal stops the waiting one too, which lost the store with exit 1.
TEST(DeliberateDeparture, ACtrlCAtTheStoreHostsTerminalWhileWaitingForMachinesStopsTheOthers) {
  const int port = local::pick_free_port();
  const std::vector<std::string> args =
      launch({"--nnodes=3:3", "--nproc_per_node=1", "--rdzv_endpoint=127.0.0.1:" + std::to_string(port),
              "--rdzv_id=ctrl_c_store_host_waiting", "--rdzv_timeout_s=20"},
             {rank_probe_path(), "wait"});
  std::vector<std::string> a_args = args;
  a_args.insert(a_args.begin(), runfile("tests/tools/launch/terminal_run"));
  Subprocess a(a_args, kEnv, /*merge_stderr=*/true);
  ASSERT_TRUE(accepts_connections(port, seconds(30)));
  Subprocess b(args, kEnv, /*merge_stderr=*/true);
  // Every 5 s (a quarter of the timeout): a counts both.
  ASSERT_TRUE(a.wait_for_stdout("waiting for machines: have 2 of --nnodes=3", 1, seconds(60))) << a.stdout_so_far();
  a.send_signal(SIGUSR1);  // a Ctrl-C typed at a's terminal
  const Finished fa = a.finish(seconds(60));
  const Finished fb = b.finish(seconds(60));
  EXPECT_EQ(exit_code(fa), 128 + SIGINT) << fa.out;
  EXPECT_NE(fa.out.find("so a Ctrl-C here stops the job on every machine: told the other machines' launchers: the "
                        "launcher "),
            std::string::npos)
      << fa.out;
  EXPECT_NE(fa.out.find(" read it; to remove machines on purpose"), std::string::npos) << fa.out;
  EXPECT_FALSE(fb.timed_out) << fb.out;
  EXPECT_EQ(exit_code(fb), 128 + SIGINT) << fb.out;
  EXPECT_NE(fb.out.find("launch: the job was stopped at the terminal of 127.0.0.1, which served the job's store: its "
                        "launcher got SIGINT (a Ctrl-C there), and the rendezvous store ends with it; rendezvous "
                        "'ctrl_c_store_host_waiting': no new round; exit status 130 (128 + 2)\n"),
            std::string::npos)
      << fb.out;
  EXPECT_EQ(fb.out.find("lost the rendezvous store"), std::string::npos) << fb.out;
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
