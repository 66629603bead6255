// When the launcher replaces a failed rank of a fault-tolerant job (--replace_after_s), and
// when it does not, with real launchers and ft_member_probe:
//  - once the job's members stopped the job (ft/stopped), no replacement can join: the
//    launcher starts none any more (it used to start them until --max_replacements was
//    spent, each ending "the job it waited to join stopped", and the job took that long);
//  - with several machines, a machine whose ranks all died still replaces them: the other
//    machines' ranks run on and take the replacements in (it used to say "no rank of this
//    machine runs on", and fail the job while the others trained on);
//  - once every member gave up forming a generation (nobody is left to take a replacement
//    in), no machine replaces its ranks (each joiner waited out its recovery timeout, and
//    was replaced again on every machine);
//  - an ask of the job's store that failed (node 0's launcher stopped a while) is asked
//    again at the end, so that a refused joiner is no failure of the job (it was counted as
//    asked, and the job failed although its members finished).
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "api/process/local_processes.h"
#include "ft/store_keys.h"
#include "launch/refused_member.h"
#include "launch/replacement_notice.h"
#include "tests/tools/launch/launcher_harness.h"

namespace distcomm {
namespace testing {
namespace {

const auto* const kAdoptOrphans = ::testing::AddGlobalTestEnvironment(new AdoptOrphans);

using Clock = std::chrono::steady_clock;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

double seconds_since(Clock::time_point began) {
  return std::chrono::duration<double>(Clock::now() - began).count();
}

// The launcher spells ft/'s stop key itself (it does not link ft/): it must stay ft/'s.
TEST(ReplacementDecisions, TheLaunchersStopKeyIsFtsOwn) {
  EXPECT_EQ(launch::job_stopped_key(), std::string(ft::keys::kRoot) + "/" + ft::keys::kStopped);
}

// Ranks 1 and 2 of 3 die; the survivor (min_members 2) waits 1.5 s for their replacements,
// which start after 0.3 s but take 5 s to come (the shell sleeps before the probe runs), so
// it stops the job. The joiners then end "the job it waited to join stopped". Replacing them
// (and the survivor) again would cost 5 s a round, up to --max_replacements=3 rounds.
TEST(ReplacementDecisions, NoReplacementOnceTheMembersStoppedTheJob) {
  const std::string probe = runfile("tests/tools/launch/ft_member_probe");
  const std::string slow_joiner = "if [ \"$DISTCOMM_FT_JOIN\" = 1 ]; then sleep 5; fi; exec \"$0\" \"$@\"";
  const Clock::time_point began = Clock::now();
  Finished f = run(launch({"--nproc_per_node=3", "--on_failure=continue", "--replace_after_s=0.3",
                           "--max_replacements=3"},
                          {"/bin/sh", "-c", slow_joiner, probe, "--kill_rank=1", "--also_kill_rank=2", "--kill_step=3",
                           "--steps=1000", "--min_members=2", "--recovery_timeout_ms=1500"}),
                   std::chrono::seconds(90), {"DISTCOMM_FT_HEARTBEAT_TIMEOUT_MS=1000"});
  const double took = seconds_since(began);
  ASSERT_FALSE(f.timed_out) << f.err;
  EXPECT_TRUE(contains(f.err, "started rank 1's replacement 1 ")) << f.err;
  EXPECT_TRUE(contains(f.err, "the job it waited to join stopped")) << f.err;
  EXPECT_TRUE(contains(f.err, "the fault-tolerant job's members stopped it (")) << f.err;
  EXPECT_TRUE(contains(f.err, "not replaced: the job's members stopped it")) << f.err;
  for (const char* rank : {"0", "1", "2"}) {
    EXPECT_FALSE(contains(f.err, std::string("started rank ") + rank + "'s replacement 2 ")) << f.err;
  }
  EXPECT_FALSE(contains(f.err, "started rank 0's replacement")) << f.err;
  // The job failed, by its first failure (a killed rank), not for want of replacements.
  EXPECT_TRUE(contains(f.err, "the job failed; the first failure: rank ")) << f.err;
  EXPECT_FALSE(contains(f.err, "no replacements left")) << f.err;
  EXPECT_NE(exit_code(f), 0) << f.err;
  // Start-up, 3 steps, the survivor's 1.5 s and the joiners' 5 s: about 7-8 s. Three more
  // rounds of replacements would take 10 s more (18 s in all, measured without the fix).
  EXPECT_LT(took, 13.0) << f.err;
  EXPECT_TRUE(no_orphan_running());
}

// The word a survivor quotes for a rank not replaced under --max_replacements=0 says that
// replacements are off: "rank 1 has had 0 replacements" read as if some had been due.
TEST(ReplacementDecisions, ABudgetOfNoneIsSaidAsReplacementsOff) {
  EXPECT_EQ(launch::replacements_used_up(1, 0, 0), "replacements are off (--max_replacements=0)");
  EXPECT_EQ(launch::replacements_used_up(1, 1, 2), "rank 1 has had 1 replacement (--max_replacements=2)");
  EXPECT_EQ(launch::replacements_used_up(1, 3, 3), "rank 1 has had 3 replacements (--max_replacements=3)");
}

// Two launchers (--nnodes=2, here on one machine); both ranks of node 1 die in step 3. Node
// 0's ranks train on, and node 1's launcher replaces its ranks: the joiners are taken in,
// and the job succeeds.
TEST(ReplacementDecisions, AMachineWhoseRanksAllDiedReplacesThem) {
  const std::string probe = runfile("tests/tools/launch/ft_member_probe");
  const std::string port = std::to_string(local::pick_free_port());
  const std::vector<std::string> env = {"DISTCOMM_FT_HEARTBEAT_TIMEOUT_MS=1000", "DISTCOMM_RUN_ID=node1_all_died",
                                        "DISTCOMM_STORE_TOKEN=secret"};
  auto node = [&](int node_rank) {
    return launch({"--nnodes=2", "--node_rank=" + std::to_string(node_rank), "--nproc_per_node=2",
                   "--master_port=" + port, "--on_failure=continue", "--replace_after_s=0.3", "--max_replacements=2"},
                  {probe, "--kill_rank=2", "--also_kill_rank=3", "--kill_step=3", "--steps=250"});
  };
  Subprocess node0(node(0), env);
  Subprocess node1(node(1), env);
  const Finished f1 = node1.finish(std::chrono::seconds(120));
  const Finished f0 = node0.finish(std::chrono::seconds(60));
  ASSERT_FALSE(f1.timed_out) << f1.err;
  ASSERT_FALSE(f0.timed_out) << f0.err;
  EXPECT_FALSE(contains(f1.err, "no rank of this machine runs on")) << f1.err;
  EXPECT_FALSE(contains(f1.err, "is not started")) << f1.err;
  EXPECT_TRUE(contains(f1.err, "started rank 2's replacement 1 ")) << f1.err;
  EXPECT_TRUE(contains(f1.err, "started rank 3's replacement 1 ")) << f1.err;
  // Taken in: they trained with the others to the end.
  EXPECT_TRUE(contains(f1.out, "rank2+1: 250 steps")) << f1.out << f1.err;
  EXPECT_TRUE(contains(f1.out, "rank3+1: 250 steps")) << f1.out << f1.err;
  EXPECT_TRUE(contains(f1.err, "every rank's last process exited 0")) << f1.err;
  EXPECT_EQ(exit_code(f1), 0) << f1.err;
  EXPECT_TRUE(contains(f0.out, "rank0: 250 steps")) << f0.out;
  EXPECT_EQ(exit_code(f0), 0) << f0.err;
  EXPECT_TRUE(no_orphan_running());
}

// The other side of the one above: node 1's rank 3 dies, its replacement is due in 20 s,
// and the job ends before that (rank 2 exits 0). Nothing is left to join: node 1's launcher
// ends with the others, and starts no joiner into an ended job (which would wait for node
// 0's store, gone by then, until its own timeout).
TEST(ReplacementDecisions, NoReplacementOnceARankOfTheMachineEndedCleanly) {
  const std::string probe = runfile("tests/tools/launch/ft_member_probe");
  const std::string port = std::to_string(local::pick_free_port());
  const std::vector<std::string> env = {"DISTCOMM_FT_HEARTBEAT_TIMEOUT_MS=1000", "DISTCOMM_RUN_ID=ended_before_due",
                                        "DISTCOMM_STORE_TOKEN=secret"};
  auto node = [&](int node_rank) {
    return launch({"--nnodes=2", "--node_rank=" + std::to_string(node_rank), "--nproc_per_node=2",
                   "--master_port=" + port, "--on_failure=continue", "--replace_after_s=20"},
                  {probe, "--kill_rank=3", "--kill_step=3", "--steps=30"});
  };
  const Clock::time_point began = Clock::now();
  Subprocess node0(node(0), env);
  Subprocess node1(node(1), env);
  const Finished f1 = node1.finish(std::chrono::seconds(90));
  const double took = seconds_since(began);
  const Finished f0 = node0.finish(std::chrono::seconds(60));
  ASSERT_FALSE(f1.timed_out) << f1.err;
  ASSERT_FALSE(f0.timed_out) << f0.err;
  EXPECT_TRUE(contains(f1.out, "rank2: 30 steps")) << f1.out << f1.err;
  EXPECT_FALSE(contains(f1.err, "started rank 3's replacement")) << f1.err;
  EXPECT_TRUE(contains(f1.err, "its replacement was not due before the other ranks ended")) << f1.err;
  EXPECT_LT(took, 15.0) << f1.err;  // not the 20 s to the replacement's start, and its wait
  EXPECT_EQ(exit_code(f0), 0) << f0.err;
  EXPECT_TRUE(no_orphan_running());
}

// Two launchers; every rank's generation fails while forming, on every member (its backend
// has no plugin: each creation fails at once), and each gives up after 3 tries with the same
// members. Nobody is left to take a replacement in: the last member to give up stops the job
// (ft/stopped), and no launcher replaces its ranks. Before, each machine replaced them (as
// in AMachineWhoseRanksAllDiedReplacesThem), each joiner waited out its 10 s recovery
// timeout and was replaced again, up to --max_replacements=2 on both machines: over 20 s
// for a job that had ended in 2.
TEST(ReplacementDecisions, NoReplacementOnceEveryMemberGaveUpForming) {
  const std::string probe = runfile("tests/tools/launch/ft_member_probe");
  const std::string port = std::to_string(local::pick_free_port());
  const std::vector<std::string> env = {"DISTCOMM_FT_HEARTBEAT_TIMEOUT_MS=1000", "DISTCOMM_RUN_ID=all_gave_up_forming",
                                        "DISTCOMM_STORE_TOKEN=secret"};
  auto node = [&](int node_rank) {
    return launch({"--nnodes=2", "--node_rank=" + std::to_string(node_rank), "--nproc_per_node=2",
                   "--master_port=" + port, "--on_failure=continue", "--replace_after_s=0.3", "--max_replacements=2"},
                  {probe, "--backend=no_such_backend", "--steps=30", "--recovery_timeout_ms=10000"});
  };
  const Clock::time_point began = Clock::now();
  Subprocess node0(node(0), env);
  Subprocess node1(node(1), env);
  const Finished f1 = node1.finish(std::chrono::seconds(120));
  const Finished f0 = node0.finish(std::chrono::seconds(60));
  const double took = seconds_since(began);
  ASSERT_FALSE(f1.timed_out) << f1.err;
  ASSERT_FALSE(f0.timed_out) << f0.err;
  const std::string both = f0.err + "\n--- node 1 ---\n" + f1.err;
  EXPECT_TRUE(contains(both, "gave up forming generation ")) << both;
  EXPECT_TRUE(contains(both, "gave up forming it or is gone: nobody is left to go on")) << both;
  for (const char* rank : {"0", "1", "2", "3"}) {
    EXPECT_FALSE(contains(both, std::string("started rank ") + rank + "'s replacement 2 ")) << both;
  }
  EXPECT_FALSE(contains(both, "waited to join, and generation")) << both;  // no joiner's own timeout
  EXPECT_NE(exit_code(f0), 0) << f0.err;
  EXPECT_NE(exit_code(f1), 0) << f1.err;
  // Start-up and 3 failed formings: a few seconds; one joiner's wait alone is 10 s.
  EXPECT_LT(took, 9.0) << both;
  EXPECT_TRUE(no_orphan_running());
}

// Node 1's rank 3 dies; its replacement is refused (misfit). As it ends, node 0's launcher
// (which serves the job's store) is stopped for 3.5 s, so node 1's launcher's ask at the
// joiner's exit fails (2 s), and the asks at exits are skipped for 10 s after that. The
// members go on once node 0's launcher runs again.
struct StoppedNode0 {
  Finished f0, f1;
  bool marked = false;
};

StoppedNode0 refused_while_node0_stopped(const std::string& name, int max_replacements,
                                         const std::string& after_refusal, const std::string& replace_after_s) {
  const std::string probe = runfile("tests/tools/launch/ft_member_probe");
  const std::string port = std::to_string(local::pick_free_port());
  const std::string mark = temp_path(name + "_joiner_ended");
  ::unlink(mark.c_str());
  const std::vector<std::string> env = {"DISTCOMM_FT_HEARTBEAT_TIMEOUT_MS=1000", "DISTCOMM_RUN_ID=" + name,
                                        "DISTCOMM_STORE_TOKEN=secret", "JOINER_MARK=" + mark};
  // A joiner's end is marked, and its exit held 0.5 s: node 0's launcher is stopped by then.
  const std::string slow_exit =
      "if [ \"$DISTCOMM_FT_JOIN\" = 1 ]; then \"$0\" \"$@\"; rc=$?; : > \"$JOINER_MARK\"; sleep 0.5; exit $rc; fi; "
      "exec \"$0\" \"$@\"";
  auto node = [&](int node_rank) {
    return launch({"--nnodes=2", "--node_rank=" + std::to_string(node_rank), "--nproc_per_node=2",
                   "--master_port=" + port, "--on_failure=continue", "--replace_after_s=" + replace_after_s,
                   "--max_replacements=" + std::to_string(max_replacements)},
                  {"/bin/sh", "-c", slow_exit, probe, "--kill_rank=3", "--kill_step=3", "--steps=10",
                   "--misfit_replacement", "--after_refusal=" + after_refusal});
  };
  Subprocess node0(node(0), env);
  Subprocess node1(node(1), env);
  struct stat st;
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(90);
  while (::stat(mark.c_str(), &st) != 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  StoppedNode0 r;
  r.marked = ::stat(mark.c_str(), &st) == 0;
  if (r.marked) {
    ::kill(node0.pid(), SIGSTOP);
    std::this_thread::sleep_for(std::chrono::milliseconds(3500));
    ::kill(node0.pid(), SIGCONT);
  }
  r.f1 = node1.finish(std::chrono::seconds(120));
  r.f0 = node0.finish(std::chrono::seconds(60));
  return r;
}

// --max_replacements=1: none is due after the refused joiner; the ask at the end of the job
// finds the refusal (the failed ask counted as asked, and the end's was skipped: the job
// failed).
TEST(ReplacementDecisions, AFailedAskIsAskedAgainAtTheEnd) {
  const StoppedNode0 r = refused_while_node0_stopped("ask_again_at_end", 1, "60", "0.3");
  const Finished& f1 = r.f1;
  ASSERT_TRUE(r.marked) << f1.err;
  ASSERT_FALSE(f1.timed_out) << f1.err;
  ASSERT_FALSE(r.f0.timed_out) << r.f0.err;
  // The ask at the joiner's exit failed (said once), and the end's found the refusal.
  EXPECT_TRUE(contains(f1.err, "cannot ask the job's store")) << f1.err;
  EXPECT_TRUE(contains(f1.err, "rank 3's replacement (member rank3+1, pid ")) << f1.err;
  EXPECT_TRUE(contains(f1.err, ") was refused by the fault-tolerant job's members")) << f1.err;
  EXPECT_FALSE(contains(f1.err, "the job failed")) << f1.err;
  EXPECT_TRUE(contains(f1.err, "every rank's last process exited 0")) << f1.err;
  EXPECT_EQ(exit_code(f1), 0) << f1.err;
  EXPECT_TRUE(contains(f1.out, "rank2: ")) << f1.out;
  EXPECT_EQ(exit_code(r.f0), 0) << r.f0.err;
  EXPECT_TRUE(no_orphan_running());
}

// --replace_after_s=4: the refused joiner's replacement is due 4 s after its exit, once node
// 0's launcher runs again, while the members train on (400 steps after the refusal); the ask
// before it starts finds the refusal, and it is not started (that ask was skipped for 10 s
// after the failed one, and the refused program started again).
TEST(ReplacementDecisions, TheAskBeforeAReplacementStartsAsksAfterAFailedOne) {
  const StoppedNode0 r = refused_while_node0_stopped("ask_again_before_start", 3, "400", "4");
  const Finished& f1 = r.f1;
  ASSERT_TRUE(r.marked) << f1.err;
  ASSERT_FALSE(f1.timed_out) << f1.err;
  ASSERT_FALSE(r.f0.timed_out) << r.f0.err;
  EXPECT_TRUE(contains(f1.err, "cannot ask the job's store")) << f1.err;
  EXPECT_TRUE(contains(f1.err, ") was refused by the fault-tolerant job's members")) << f1.err;
  EXPECT_TRUE(contains(f1.err, "the replacement its exit asked for is not started")) << f1.err;
  EXPECT_FALSE(contains(f1.err, "started rank 3's replacement 2 ")) << f1.err;
  EXPECT_TRUE(contains(f1.err, "every rank's last process exited 0")) << f1.err;
  EXPECT_EQ(exit_code(f1), 0) << f1.err;
  EXPECT_EQ(exit_code(r.f0), 0) << r.f0.err;
  EXPECT_TRUE(no_orphan_running());
}

}  // namespace
}  // namespace testing
}  // namespace distcomm
