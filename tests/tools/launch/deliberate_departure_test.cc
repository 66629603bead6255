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
// its signal stops the job on every machine, each saying so in one line -- in a round, in
// its hold for a signal of its own, while it waits for the others' ranks, between rounds.
// Three real launchers on loopback stand for the machines (--nnodes=1:3), their ranks
// rank_probe.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "api/process/job_identity.h"
#include "api/process/local_processes.h"
#include "api/store/tcp_store.h"
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

// How start_three starts the three, beyond what they share.
struct Shape {
  bool c_at_terminal = false;  // c with a terminal of its own (terminal_run)
  int max_restarts = 3;
  bool a_at_terminal = false;
  std::vector<std::string> a_rank = {"wait"};  // rank_probe's arguments on a
  std::vector<std::string> b_rank = {"wait"};  // and on b (c's: "wait")
  std::vector<std::string> b_flags;            // b's launcher's own, besides the job's
};

// Three launchers in round 1, each rank that waits running (its "ready" line said).
void start_three(ThreeMachines& m, const std::string& rdzv_id, const Shape& shape) {
  const int port = local::pick_free_port();
  m.port = port;
  const std::vector<std::string> flags = {"--nnodes=1:3",
                                          "--nproc_per_node=1",
                                          "--rdzv_endpoint=127.0.0.1:" + std::to_string(port),
                                          "--rdzv_id=" + rdzv_id,
                                          "--rdzv_last_call_s=30",
                                          "--max_restarts=" + std::to_string(shape.max_restarts)};
  auto launcher = [&](const std::vector<std::string>& rank, const std::vector<std::string>& own, bool at_terminal) {
    std::vector<std::string> command = {rank_probe_path()};
    command.insert(command.end(), rank.begin(), rank.end());
    std::vector<std::string> all = flags;
    all.insert(all.end(), own.begin(), own.end());
    std::vector<std::string> args = launch(all, command);
    if (at_terminal) args.insert(args.begin(), runfile("tests/tools/launch/terminal_run"));
    return std::make_unique<Subprocess>(args, kEnv, /*merge_stderr=*/true);
  };
  m.a = launcher(shape.a_rank, {}, shape.a_at_terminal);
  ASSERT_TRUE(accepts_connections(port, seconds(30)));
  m.b = launcher(shape.b_rank, shape.b_flags, false);
  m.c = launcher({"wait"}, {}, shape.c_at_terminal);
  const std::vector<std::string>* ranks[] = {&shape.a_rank, &shape.b_rank, nullptr};
  int i = 0;
  for (Subprocess* p : {m.a.get(), m.b.get(), m.c.get()}) {
    ASSERT_TRUE(p->wait_for_stdout("round 1: 3 machines (min 1, max 3)", 1, seconds(60))) << p->stdout_so_far();
    const std::vector<std::string>* rank = ranks[i++];
    if (rank == nullptr || rank->front() == "wait") {
      ASSERT_TRUE(p->wait_for_stdout("ready ", 1, seconds(60))) << p->stdout_so_far();
    }
  }
}

// Three launchers, each with one rank running (its "ready" line said) in round 1; c's with
// a terminal of its own (terminal_run) where `c_at_terminal`, a's where `a_at_terminal`.
void start_three(ThreeMachines& m, const std::string& rdzv_id, bool c_at_terminal = false, int max_restarts = 3,
                 bool a_at_terminal = false) {
  Shape shape;
  shape.c_at_terminal = c_at_terminal;
  shape.max_restarts = max_restarts;
  shape.a_at_terminal = a_at_terminal;
  start_three(m, rdzv_id, shape);
}

// The pid of the rank whose "ready <pid> ..." line is the first in `out`; 0 when none.
pid_t ready_pid(const std::string& out) {
  std::smatch match;
  if (!std::regex_search(out, match, std::regex(R"(\] ready (\d+) )"))) return 0;
  return static_cast<pid_t>(std::stol(match[1]));
}

// Until `condition`, looked at every 20 ms, `deadline` at most; whether it came.
template <typename Condition>
bool wait_until(Condition condition, std::chrono::milliseconds deadline) {
  for (const auto until = Clock::now() + deadline; Clock::now() < until;) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return condition();
}

// How many times `what` is in `text`.
size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

// The last line of `text`, without its '\n'.
std::string last_line_of(const std::string& text) {
  const std::vector<std::string> lines = lines_of(text);
  return lines.empty() ? "" : lines.back();
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
  // One job, one line with its exit status, the last: the attempt's says how its rank was
  // stopped, and by whom, without one (it gave "exit status 130" too, a line before).
  EXPECT_EQ(count_of(fa.out, "exit status"), 1u) << fa.out;
  EXPECT_NE(last_line_of(fa.out).find("; exit status " + code), std::string::npos) << fa.out;
  EXPECT_TRUE(std::regex_search(fa.out, std::regex("\nlaunch: the job was stopped by " + local::signal_name(sig) +
                                                   " sent to the launcher [^\n]*; rank 0 was stopped by the "
                                                   "launcher\n")))
      << fa.out;
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

// Another machine's launcher (c) got SIGTERM, which may be the whole job's: a and b hold
// 1.5 s for their own. A Ctrl-C at the store host's terminal during its hold stopped a alone
// ("this launcher got SIGINT too: ...; no new round", exit 130) without writing the job's
// stop; b, after its hold, gave up under --max_restarts=0 blaming c (exit 1), or restarted
// and lost the store. Now a stops the job, and b ends by that stop during its hold.
TEST(DeliberateDeparture, ACtrlCAtTheStoreHostsTerminalDuringItsHoldStopsTheJob) {
  ThreeMachines m;
  ASSERT_NO_FATAL_FAILURE(start_three(m, "ctrl_c_store_host_hold", /*c_at_terminal=*/false, /*max_restarts=*/0,
                                      /*a_at_terminal=*/true));
  const pid_t a_rank = ready_pid(m.a->stdout_so_far());
  ASSERT_GT(a_rank, 0) << m.a->stdout_so_far();
  m.c->send_signal(SIGTERM);
  const Finished fc = m.c->finish(seconds(60));
  EXPECT_EQ(exit_code(fc), 128 + SIGTERM) << fc.out;
  for (Subprocess* p : {m.b.get(), m.a.get()}) {
    ASSERT_TRUE(p->wait_for_stdout(" (127.0.0.1) left: interrupted (SIGTERM)", 1, seconds(60))) << p->stdout_so_far();
  }
  // a's rank was stopped and reaped: a holds now (its hold ends with a line, which it must
  // not have said yet), and b does too.
  ASSERT_TRUE(wait_until([&] { return !process_exists(a_rank); }, seconds(30))) << m.a->stdout_so_far();
  m.a->send_signal(SIGUSR1);  // a Ctrl-C typed at a's terminal
  const Finished fa = m.a->finish(seconds(60));
  const Finished fb = m.b->finish(seconds(60));
  // a got its Ctrl-C during the hold (it was sent once a's rank was reaped, 1.5 s before
  // the hold's end): it said "none came" where a request to the store had taken the signal.
  EXPECT_EQ(fa.out.find(" of this launcher's own (a scheduler"), std::string::npos) << fa.out;
  EXPECT_EQ(exit_code(fa), 128 + SIGINT) << fa.out;
  EXPECT_TRUE(std::regex_search(
      last_line_of(fa.out),
      std::regex("^launch: this machine's launcher serves the job's rendezvous store "
                 "\\(--rdzv_endpoint=127\\.0\\.0\\.1:" +
                 std::to_string(m.port) +
                 "\\), so a Ctrl-C here stops the job on every machine: told the other machines' launchers: "
                 "(node 1 read it; node 2 had left \\(interrupted \\(SIGTERM\\)\\)|node 1 had left \\(interrupted "
                 "\\(SIGTERM\\)\\); node 2 read it); to remove machines on purpose")))
      << fa.out;
  EXPECT_EQ(count_of(fa.out, "exit status"), 1u) << fa.out;
  EXPECT_FALSE(fb.timed_out) << fb.out;
  EXPECT_EQ(exit_code(fb), 128 + SIGINT) << fb.out;
  EXPECT_EQ(last_line_of(fb.out),
            "launch: the job was stopped at node 0's terminal (127.0.0.1), which served the job's store: its launcher "
            "got SIGINT (a Ctrl-C there), and the rendezvous store ends with it; rendezvous 'ctrl_c_store_host_hold' "
            "round 1 ended, no new round; exit status 130 (128 + 2)")
      << fb.out;
  EXPECT_EQ(fb.out.find("gave up"), std::string::npos) << fb.out;
  EXPECT_EQ(fb.out.find("lost the rendezvous store"), std::string::npos) << fb.out;
  EXPECT_TRUE(no_orphan_running());
}

// The store host's own rank exited 0 and it waits for the others' to end: a SIGTERM there
// stops the job, and its line says what it was doing (as node 0 of a static job says it):
// it said only that it serves the store.
TEST(DeliberateDeparture, AStopOfTheStoreHostWhileItWaitsForTheOthersSaysItsRanksHadExitedZero) {
  ThreeMachines m;
  Shape shape;
  shape.a_rank = {"env"};  // exits 0 at once; b's and c's wait
  ASSERT_NO_FATAL_FAILURE(start_three(m, "store_host_waits", shape));
  // a waits for the others once it said, in the store, that its ranks finished.
  {
    TCPStoreOptions options;
    options.port = m.port;
    options.identity = {"rdzv-store_host_waits", "deliberate-departure-test"};
    options.timeout = seconds(10);
    TCPStore store(options);
    ASSERT_TRUE(wait_until([&] { return store.check({"round/1/done"}); }, seconds(30))) << m.a->stdout_so_far();
  }
  m.a->send_signal(SIGTERM);
  const Finished fa = m.a->finish(seconds(60));
  const Finished fb = m.b->finish(seconds(60));
  const Finished fc = m.c->finish(seconds(60));
  EXPECT_EQ(exit_code(fa), 128 + SIGTERM) << fa.out;
  EXPECT_EQ(last_line_of(fa.out),
            "launch: this machine's rank 0 had exited 0 and its launcher was waiting for the other machines' ranks to "
            "end; it serves the job's rendezvous store (--rdzv_endpoint=127.0.0.1:" +
                std::to_string(m.port) +
                "), so its SIGTERM stops the job on every machine: told the other machines' launchers: node 1 read it; "
                "node 2 read it; exit status 143 (128 + 15)")
      << fa.out;
  for (const Finished* f : {&fb, &fc}) {
    EXPECT_EQ(exit_code(*f), 128 + SIGTERM) << f->out;
    EXPECT_NE(last_line_of(f->out).find("launch: the job was stopped on node 0 (127.0.0.1), which served the job's "
                                        "store: its launcher got SIGTERM"),
              std::string::npos)
        << f->out;
  }
  EXPECT_TRUE(no_orphan_running());
}

// Stopped between rounds, right after a machine was removed on purpose (c, a Ctrl-C at its
// terminal) while b still stops its rank: the store host names b as the last round did,
// "node 1 (127.0.0.1)", not by its launcher's id ("the launcher host-123-ab12cd read it").
TEST(DeliberateDeparture, TheStoreHostStoppedBetweenRoundsNamesTheOthersAsTheLastRoundDid) {
  ThreeMachines m;
  Shape shape;
  shape.c_at_terminal = true;
  shape.a_at_terminal = true;
  shape.b_rank = {"wait", "ignore_term"};     // b's rank takes the grace to stop:
  shape.b_flags = {"--grace_period_s=3"};     // b is back for round 2 3 s later
  ASSERT_NO_FATAL_FAILURE(start_three(m, "store_host_between_rounds", shape));
  m.c->send_signal(SIGUSR1);  // a Ctrl-C at c's terminal: removed on purpose
  const Finished fc = m.c->finish(seconds(60));
  EXPECT_EQ(exit_code(fc), 128 + SIGINT) << fc.out;
  ASSERT_TRUE(m.a->wait_for_stdout("the next round forms without waiting", 1, seconds(60))) << m.a->stdout_so_far();
  m.a->send_signal(SIGUSR1);  // a Ctrl-C at a's terminal, while a waits for round 2
  const Finished fa = m.a->finish(seconds(60));
  const Finished fb = m.b->finish(seconds(60));
  ASSERT_EQ(fa.out.find("round 2: "), std::string::npos) << "round 2 formed first: not what this test is about\n"
                                                         << fa.out;
  EXPECT_EQ(exit_code(fa), 128 + SIGINT) << fa.out;
  EXPECT_TRUE(std::regex_search(
      last_line_of(fa.out),
      std::regex("so a Ctrl-C here stops the job on every machine: told the other machines' launchers: node [12] "
                 "\\(127\\.0\\.0\\.1\\) (read it|had not read it within 5s); to remove machines on purpose")))
      << fa.out;
  EXPECT_EQ(fa.out.find("the launcher "), std::string::npos) << fa.out;
  EXPECT_EQ(exit_code(fb), 128 + SIGINT) << fb.out;
  EXPECT_NE(fb.out.find("launch: the job was stopped at the terminal of 127.0.0.1, which served the job's store"),
            std::string::npos)
      << fb.out;
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
