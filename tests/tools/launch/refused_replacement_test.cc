// The launcher when the members of a fault-tolerant job refuse a replacement (ft/joiner_
// refusal.h: its step made every member's fail): the launcher reads the refusal in the job's
// store (launch/refused_member.h), says so in one line, counts the refused process's exit as
// no failure, starts no other replacement for it (it would be refused again, after three
// more failed generations), and the job's outcome is that of the members that went on. It
// used to start replacements up to --max_replacements, each refused in turn, and to report
// the job as failed although the members finished.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "api/process/local_processes.h"
#include "ft/liveness.h"
#include "ft/store_keys.h"
#include "launch/refused_member.h"
#include "tests/tools/launch/launcher_harness.h"

namespace distcomm {
namespace testing {
namespace {

const auto* const kAdoptOrphans = ::testing::AddGlobalTestEnvironment(new AdoptOrphans);

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The launcher spells ft/'s names itself (it does not link ft/): they must stay ft/'s.
TEST(RefusedMember, TheLaunchersNamesAreFtsOwn) {
  EXPECT_EQ(launch::dead_mark_prefix(), std::string(ft::keys::kRoot) + "/" + ft::keys::dead(""));
  EXPECT_EQ(std::string(launch::kRefusedMarkText), std::string(ft::kRefusedMark));
  const auto refused = launch::refusal_of("ft/dead/rank2+1", std::string(ft::kRefusedMark) + "step 4 failed");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->id, "rank2+1");
  EXPECT_EQ(refused->why, "step 4 failed");
  EXPECT_FALSE(launch::refusal_of("ft/dead/rank2", "its heartbeat has not moved"));
  EXPECT_FALSE(launch::refusal_of("ft/fenced/rank2", std::string(ft::kRefusedMark) + "x"));
  EXPECT_EQ(launch::member_id_of(2, 0), "rank2");
  EXPECT_EQ(launch::member_id_of(2, 1), "rank2+1");
}

// rank2 dies in step 3; its replacement (rank2+1) has one parameter more, so every step
// fails while it is a member, and after three generations the members refuse it and go on.
TEST(RefusedReplacement, IsNotReplacedAgainAndTheJobSucceeds) {
  const std::string probe = runfile("tests/tools/launch/ft_member_probe");
  Finished f = run(launch({"--nproc_per_node=3", "--on_failure=continue", "--replace_after_s=0.3",
                           "--max_replacements=3"},
                          {probe, "--kill_rank=2", "--kill_step=3", "--steps=10", "--misfit_replacement"}),
                   std::chrono::seconds(90), {"DISTCOMM_FT_HEARTBEAT_TIMEOUT_MS=1000"});
  ASSERT_FALSE(f.timed_out) << f.err;
  // The one line, naming the member, why, and that it is not replaced.
  EXPECT_TRUE(contains(f.err, "rank 2's replacement (member rank2+1, pid ")) << f.err;
  // The refusal names the joiner first (42a96d9: it named the member that aborted first).
  EXPECT_TRUE(contains(f.err, ") was refused by the fault-tolerant job's members, which go on without it: joiner "
                              "'rank2+1' (group rank 2 of generation "))
      << f.err;
  EXPECT_TRUE(contains(f.err, "it is not replaced: the same program would be refused again")) << f.err;
  EXPECT_TRUE(contains(f.err, "started rank 2's replacement 1 ")) << f.err;
  EXPECT_FALSE(contains(f.err, "started rank 2's replacement 2 ")) << f.err;
  // The members finished, and so did the job.
  EXPECT_TRUE(contains(f.out, "rank0: ")) << f.out;
  EXPECT_TRUE(contains(f.out, "rank1: ")) << f.out;
  EXPECT_TRUE(contains(f.err, "or was a joiner that the members refused (rank 2's replacement (member rank2+1")) << f.err;
  EXPECT_TRUE(contains(f.err, ": the job succeeded; the first failure: rank 2 (local rank 2, pid ")) << f.err;
  EXPECT_FALSE(contains(f.err, "the job failed")) << f.err;
  EXPECT_EQ(exit_code(f), 0) << f.err;
  EXPECT_TRUE(no_orphan_running());
}

// The same across two machines' launchers (here two on one machine: --nnodes=2 with each
// its --node_rank): the refused replacement is node 1's rank 3, whose launcher does not
// serve the job's store but asks node 0's for the mark. Before, only node 0's launcher
// (the store's) saw refusals: node 1's started replacement after replacement.
TEST(RefusedReplacement, AnotherMachinesLauncherSeesItsRefusalToo) {
  const std::string probe = runfile("tests/tools/launch/ft_member_probe");
  const std::string port = std::to_string(local::pick_free_port());
  const std::vector<std::string> env = {"DISTCOMM_FT_HEARTBEAT_TIMEOUT_MS=1000", "DISTCOMM_RUN_ID=refused_two_nodes",
                                        "DISTCOMM_STORE_TOKEN=secret"};
  auto node = [&](int node_rank) {
    return launch({"--nnodes=2", "--node_rank=" + std::to_string(node_rank), "--nproc_per_node=2",
                   "--master_port=" + port, "--on_failure=continue", "--replace_after_s=0.3", "--max_replacements=3"},
                  {probe, "--kill_rank=3", "--kill_step=3", "--steps=10", "--misfit_replacement"});
  };
  Subprocess node0(node(0), env);
  Subprocess node1(node(1), env);
  const Finished f1 = node1.finish(std::chrono::seconds(150));
  const Finished f0 = node0.finish(std::chrono::seconds(60));
  ASSERT_FALSE(f1.timed_out) << f1.err;
  ASSERT_FALSE(f0.timed_out) << f0.err;
  EXPECT_TRUE(contains(f1.err, "started rank 3's replacement 1 ")) << f1.err;
  EXPECT_TRUE(contains(f1.err, "rank 3's replacement (member rank3+1, pid ")) << f1.err;
  EXPECT_TRUE(contains(f1.err, ") was refused by the fault-tolerant job's members, which go on without it: joiner "
                               "'rank3+1' (group rank 3 of generation "))
      << f1.err;
  EXPECT_FALSE(contains(f1.err, "started rank 3's replacement 2 ")) << f1.err;
  EXPECT_TRUE(contains(f1.err, "or was a joiner that the members refused (rank 3's replacement (member rank3+1"))
      << f1.err;
  EXPECT_FALSE(contains(f1.err, "the job failed")) << f1.err;
  EXPECT_FALSE(contains(f1.err, "cannot ask the job's store")) << f1.err;
  EXPECT_EQ(exit_code(f1), 0) << f1.err;
  // The members on both machines finished.
  EXPECT_TRUE(contains(f0.out, "rank0: ")) << f0.out;
  EXPECT_TRUE(contains(f0.out, "rank1: ")) << f0.out;
  EXPECT_TRUE(contains(f1.out, "rank2: ")) << f1.out;
  EXPECT_EQ(exit_code(f0), 0) << f0.err;
  // Node 0's launcher says nothing of another machine's rank.
  EXPECT_FALSE(contains(f0.err, "was refused by")) << f0.err;
  EXPECT_TRUE(no_orphan_running());
}

}  // namespace
}  // namespace testing
}  // namespace distcomm
