// One machine of an elastic job removed on purpose: its launcher gets a Ctrl-C (SIGINT)
// from its user, stops its ranks, ends the round and leaves. The other machines start the
// next round at once, and say that the machine was removed on purpose: they waited 1.5 s
// first, for a stopping signal of their own, as after a scheduler's SIGTERM (they found
// out what happened by searching the end's words for " left: interrupted ("). After a
// SIGTERM they still wait that moment, and say so. Three real launchers on loopback stand
// for the machines (--nnodes=1:3), their ranks rank_probe.
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

// Three launchers, each with one rank running (its "ready" line said) in round 1.
void start_three(ThreeMachines& m, const std::string& rdzv_id) {
  const int port = local::pick_free_port();
  const std::vector<std::string> args =
      launch({"--nnodes=1:3", "--nproc_per_node=1", "--rdzv_endpoint=127.0.0.1:" + std::to_string(port),
              "--rdzv_id=" + rdzv_id, "--rdzv_last_call_s=30", "--max_restarts=3"},
             {rank_probe_path(), "wait"});
  m.a = std::make_unique<Subprocess>(args, kEnv, /*merge_stderr=*/true);
  ASSERT_TRUE(accepts_connections(port, seconds(30)));
  m.b = std::make_unique<Subprocess>(args, kEnv, /*merge_stderr=*/true);
  m.c = std::make_unique<Subprocess>(args, kEnv, /*merge_stderr=*/true);
  for (Subprocess* p : {m.a.get(), m.b.get(), m.c.get()}) {
    ASSERT_TRUE(p->wait_for_stdout("round 1: 3 machines (min 1, max 3)", 1, seconds(60))) << p->stdout_so_far();
    ASSERT_TRUE(p->wait_for_stdout("ready ", 1, seconds(60))) << p->stdout_so_far();
  }
}

// Signals c; returns how long until both survivors' round-2 ranks said "ready".
Clock::duration remove_c(ThreeMachines& m, int sig) {
  const Clock::time_point sent = Clock::now();
  m.c->send_signal(sig);
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

TEST(DeliberateDeparture, ACtrlCOnOneMachineStartsTheNextRoundWithoutWaiting) {
  ThreeMachines m;
  ASSERT_NO_FATAL_FAILURE(start_three(m, "ctrl_c_no_wait"));
  const Clock::duration took = remove_c(m, SIGINT);
  const std::vector<Finished> survivors = stop_survivors(m);
  std::printf("SIGINT to one launcher -> both survivors' round-2 ranks ready: %.2f s\n", seconds_of(took));
  for (const Finished& f : survivors) {
    // The departure is known to be deliberate from the end's cause, and nothing was waited for.
    EXPECT_NE(f.out.find("launch: rendezvous 'ctrl_c_no_wait' round 1: a machine was removed on purpose (its launcher "
                         "got SIGINT): the next round forms without waiting\n"),
              std::string::npos)
        << f.out;
    EXPECT_EQ(f.out.find(" of this launcher's own (a scheduler"), std::string::npos) << f.out;
    // The words for people are as they were.
    EXPECT_NE(f.out.find(") left: interrupted (SIGINT)"), std::string::npos) << f.out;
  }
  // Generous: the machine is shared and noisy. The log lines above are what tell the wait apart.
  EXPECT_LT(took, seconds(20));
  EXPECT_TRUE(no_orphan_running());
}

// SIGTERM is what a scheduler sends every machine of a job it stops: the survivors wait a
// moment for theirs (none comes here), say so, and go on.
TEST(DeliberateDeparture, ASigtermOnOneMachineHoldsTheOthersAMomentThenTheyGoOn) {
  ThreeMachines m;
  ASSERT_NO_FATAL_FAILURE(start_three(m, "sigterm_hold"));
  const Clock::duration took = remove_c(m, SIGTERM);
  const std::vector<Finished> survivors = stop_survivors(m);
  std::printf("SIGTERM to one launcher -> both survivors' round-2 ranks ready: %.2f s\n", seconds_of(took));
  for (const Finished& f : survivors) {
    EXPECT_NE(f.out.find("launch: rendezvous 'sigterm_hold' round 1: waited 1.5 s for a SIGTERM of this launcher's own "
                         "(a scheduler stopping the job signals every machine); none came\n"),
              std::string::npos)
        << f.out;
    EXPECT_EQ(f.out.find("removed on purpose"), std::string::npos) << f.out;
  }
  EXPECT_GE(took, std::chrono::milliseconds(1500));
  EXPECT_LT(took, seconds(30));
  EXPECT_TRUE(no_orphan_running());
}

}  // namespace
}  // namespace testing
}  // namespace distcomm
