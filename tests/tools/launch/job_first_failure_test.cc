// A job of two machines (two real launchers, --nnodes=2, here on one machine) names its
// first failure job-wide:
//  - a rank of node 1 is SIGKILLed and node 1's launcher stops its other ranks: gloo's
//    survivors on node 0 name the killed rank, and the others as stopped by their launcher
//    (they named node 1's every rank: "ranks [3, 4, 5] closed their connections");
//  - node 0's launcher, which cannot see node 1's ranks, names node 1's death as the job's
//    first failure, not its own ranks' failures that followed from it (a gloo loss, or an
//    ft member stopping for want of members).
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "api/process/local_processes.h"
#include "tests/tools/launch/launcher_harness.h"

namespace distcomm {
namespace testing {
namespace {

const auto* const kAdoptOrphans = ::testing::AddGlobalTestEnvironment(new AdoptOrphans);

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The launcher's last line: the first failure as it names it.
std::string last_line(const std::string& text) {
  const size_t end = text.find_last_not_of('\n');
  if (end == std::string::npos) return "";
  const size_t begin = text.rfind('\n', end);
  return text.substr(begin == std::string::npos ? 0 : begin + 1, end + 1 - (begin == std::string::npos ? 0 : begin + 1));
}

struct TwoNodes {
  Finished f0, f1;
};

// Node 0 runs ranks 0..n-1, node 1 ranks n..2n-1; each launcher its own host id, as on two
// machines (the survivors see node 1's ranks only through their connections).
TwoNodes run_two_nodes(const std::string& name, int nproc_per_node, const std::vector<std::string>& command,
                       const std::vector<std::string>& extra_env = {}) {
  const std::string port = std::to_string(local::pick_free_port());
  auto node = [&](int node_rank) {
    return launch({"--nnodes=2", "--node_rank=" + std::to_string(node_rank),
                   "--nproc_per_node=" + std::to_string(nproc_per_node), "--master_port=" + port},
                  command);
  };
  auto env = [&](int node_rank) {
    std::vector<std::string> e = {"DISTCOMM_RUN_ID=" + name, "DISTCOMM_STORE_TOKEN=secret",
                                  "DISTCOMM_HOST_ID=" + name + "_node" + std::to_string(node_rank)};
    e.insert(e.end(), extra_env.begin(), extra_env.end());
    return e;
  };
  Subprocess node0(node(0), env(0));
  Subprocess node1(node(1), env(1));
  TwoNodes r;
  r.f1 = node1.finish(std::chrono::seconds(90));
  r.f0 = node0.finish(std::chrono::seconds(90));
  return r;
}

TEST(JobFirstFailure, SurvivorsNameTheKilledRankAndNotItsStoppedMachineMates) {
  const TwoNodes r = run_two_nodes("gloo_loss", 3, {runfile("tests/tools/launch/loss_probe"), "4"});
  ASSERT_FALSE(r.f1.timed_out) << r.f1.err;
  ASSERT_FALSE(r.f0.timed_out) << r.f0.err;
  // Node 1: rank 4 was killed, its launcher stopped ranks 3 and 5.
  EXPECT_TRUE(contains(r.f1.err, "rank 4 (local rank 1, pid ")) << r.f1.err;
  EXPECT_TRUE(contains(r.f1.err, "signal SIGKILL")) << r.f1.err;
  // Node 0's ranks: rank 4 is the loss; 3 and 5 were stopped because of it.
  EXPECT_FALSE(contains(r.f0.err, "ranks [3, 4, 5] closed their connections")) << r.f0.err;
  EXPECT_TRUE(contains(r.f0.err, "rank 4 closed its connection")) << r.f0.err;
  EXPECT_TRUE(contains(r.f0.err, "ranks [3, 5] were stopped by their launcher after rank 4 failed (signal SIGKILL"))
      << r.f0.err;
  // Node 0's launcher names node 1's death as the job's first failure.
  const std::string last0 = last_line(r.f0.err);
  EXPECT_TRUE(contains(last0, "the job's first failure was on node 1 (its launcher saw it): rank 4 (local rank 1"))
      << r.f0.err;
  EXPECT_NE(exit_code(r.f0), 0) << r.f0.err;
  EXPECT_NE(exit_code(r.f1), 0) << r.f1.err;
  EXPECT_TRUE(no_orphan_running());
}

// Node 1's rank 3 is SIGKILLed in step 3; node 0's ft members (min_members 4) wait 1.5 s
// for a replacement that never comes, and stop: "only 1 member is left in generation 2 ...".
// That line is node 0's launcher's only failure, and it named it as the job's first.
TEST(JobFirstFailure, AnFtStopIsNotNamedOverAnotherMachinesDeath) {
  const TwoNodes r = run_two_nodes("ft_stop", 2,
                                   {runfile("tests/tools/launch/ft_member_probe"), "--kill_rank=3", "--kill_step=3",
                                    "--steps=1000", "--min_members=4", "--recovery_timeout_ms=1500"},
                                   // 3 s: under a loaded CI host a 1 s timeout took node 0's own rank 1 for gone.
                                   {"DISTCOMM_FT_HEARTBEAT_TIMEOUT_MS=3000"});
  ASSERT_FALSE(r.f1.timed_out) << r.f1.err;
  ASSERT_FALSE(r.f0.timed_out) << r.f0.err;
  EXPECT_TRUE(contains(r.f0.err, " left in generation ")) << r.f0.err;  // the consequence, said by the rank
  const std::string last0 = last_line(r.f0.err);
  EXPECT_TRUE(contains(last0, "the job's first failure was on node 1 (its launcher saw it): rank 3 (local rank 1"))
      << r.f0.err;
  EXPECT_TRUE(contains(last0, "SIGKILL")) << r.f0.err;
  // Node 1's launcher saw the death itself: its own line, unchanged.
  EXPECT_FALSE(contains(r.f1.err, "the job's first failure was on node")) << r.f1.err;
  EXPECT_NE(exit_code(r.f0), 0) << r.f0.err;
  EXPECT_TRUE(no_orphan_running());
}

}  // namespace
}  // namespace testing
}  // namespace distcomm
