// Static jobs across machines whose launchers disagree on the job's shape: node 0's
// launcher serves the store for nnodes x its --nproc_per_node ranks and says its shape
// there; every other launcher checks its own against it before it starts a rank, and on a
// mismatch both end at once naming both. The store still refuses a rank that counts
// another world size. Without those checks, each side waited for a rank the other never
// starts, for the whole group timeout (30 minutes), saying nothing of why.
#include <unistd.h>

#include <gtest/gtest.h>

#include "api/process/local_processes.h"
#include "tests/tools/launch/launcher_harness.h"

namespace distcomm {
namespace testing {
namespace {

using std::chrono::seconds;

const auto* const kAdoptOrphans = ::testing::AddGlobalTestEnvironment(new AdoptOrphans);

struct Shape {
  int nnodes;
  int nproc_per_node;
  int node_rank;
};

const std::vector<std::string>& job_env() {
  static const std::vector<std::string> env = {"DISTCOMM_PLUGIN_PATH=" + runfile("tests/api/plugins"),
                                               "DISTCOMM_RUN_ID=two_shapes", "DISTCOMM_STORE_TOKEN=secret"};
  return env;
}

std::vector<std::string> node(const Shape& s, const std::string& port, const std::vector<std::string>& more = {}) {
  std::vector<std::string> flags = {"--nnodes=" + std::to_string(s.nnodes), "--node_rank=" + std::to_string(s.node_rank),
                                    "--nproc_per_node=" + std::to_string(s.nproc_per_node), "--master_port=" + port,
                                    "--backend=any_size"};
  flags.insert(flags.end(), more.begin(), more.end());
  return launch(flags, {runfile("tests/tools/launch/ordered_probe")});
}

std::string host_name() {
  char name[256] = {};
  EXPECT_EQ(::gethostname(name, sizeof(name) - 1), 0);
  return name;
}

// "2 nodes x 2 ranks per node"
std::string shape_text(const Shape& s) {
  return std::to_string(s.nnodes) + (s.nnodes == 1 ? " node" : " nodes") + " x " + std::to_string(s.nproc_per_node) +
         (s.nproc_per_node == 1 ? " rank" : " ranks") + " per node";
}

// Node 0's launcher, given `zero`, and another machine's, given `other` (started first: its
// launcher waits for node 0's store meanwhile), end at once, each with a last line naming
// both shapes, before the other's ranks ever start.
void expect_both_end_naming_both(const Shape& zero, const Shape& other) {
  const std::string port = std::to_string(local::pick_free_port());
  const auto started = std::chrono::steady_clock::now();
  Subprocess other_node(node(other, port), job_env());
  ::usleep(300000);
  Subprocess node0(node(zero, port), job_env());
  // Well within the 30-minute group timeout the ranks had waited before.
  const Finished f0 = node0.finish(seconds(30));
  const Finished f1 = other_node.finish(seconds(30));
  EXPECT_FALSE(f0.timed_out) << f0.err;
  EXPECT_FALSE(f1.timed_out) << f1.err;
  EXPECT_LT(std::chrono::steady_clock::now() - started, seconds(30));
  EXPECT_EQ(exit_code(f0), 1) << f0.err;
  EXPECT_EQ(exit_code(f1), 1) << f1.err;
  const std::string flags = " (--nnodes, --nproc_per_node): give every launcher the same";
  const std::string n = std::to_string(other.node_rank);
  // Node 0's launcher stopped its ranks, which waited for the others, and says why.
  const std::vector<std::string> lines0 = lines_of(f0.err);
  ASSERT_FALSE(lines0.empty()) << f0.err;
  EXPECT_EQ(lines0.back(), "launch: the job cannot run: this launcher (node 0) runs " + shape_text(zero) + ", node " +
                               n + "'s launcher (on " + host_name() + ") was given " + shape_text(other) + flags)
      << f0.err;
  // The other launcher started no rank, and says why.
  const std::vector<std::string> lines1 = lines_of(f1.err);
  ASSERT_FALSE(lines1.empty()) << f1.err;
  EXPECT_EQ(lines1.back(), "launch: the job cannot run: node 0's launcher runs " + shape_text(zero) +
                               ", this one (node " + n + ") was given " + shape_text(other) + flags)
      << f1.err;
  EXPECT_EQ(f1.err.find("[rank "), std::string::npos) << f1.err;
  EXPECT_TRUE(no_orphan_running());
}

// Node 0 (2 ranks a node) and node 1 (3 ranks a node) of a 2-node job: worlds of 4 and 6.
// Node 1's launcher finds out before its ranks start: both launchers name the two shapes as
// they were given (the store's world-size refusal, which knows node 0's shape only, had
// said "6 ranks (with 2 nodes: 3 per node)", dividing by node 0's count).
TEST(NodeShape, LaunchersGivenAnotherNprocPerNodeEndAtOnceSayingBothShapes) {
  expect_both_end_naming_both({2, 2, 0}, {2, 3, 1});
}

// The same world size (4) in another shape: node 1 given --nnodes=4 --nproc_per_node=1
// claimed rank 1, which node 0's launcher started too: "rank 1 was started twice", nothing
// about the flags.
TEST(NodeShape, SameWorldSizeOtherShapeAtNodeRank1EndsNamingBothShapes) {
  expect_both_end_naming_both({2, 2, 0}, {4, 1, 1});
}

// ... and at --node_rank=2 it claimed rank 2, while nobody started rank 3: every rank waited
// for it until the init timeout (30 minutes), and no line named the flags.
TEST(NodeShape, SameWorldSizeOtherShapeAtNodeRank2EndsNamingBothShapes) {
  expect_both_end_naming_both({2, 2, 0}, {4, 1, 2});
}

// Ranks of another world size that no launcher checked (--serve_store=false: that launcher
// leaves the store to its program): node 0's store refuses them. It knows their world size
// only, not how their launcher divided it into nodes, and says no more than that.
TEST(NodeShape, StoreRefusingAnotherWorldSizeSaysOnlyWhatItKnows) {
  const std::string port = std::to_string(local::pick_free_port());
  const auto started = std::chrono::steady_clock::now();
  Subprocess node2(node({3, 2, 2}, port, {"--serve_store=false"}), job_env());
  ::usleep(300000);  // its ranks wait for node 0's store meanwhile
  Subprocess node0(node({2, 2, 0}, port), job_env());
  const Finished f0 = node0.finish(seconds(30));
  const Finished f2 = node2.finish(seconds(30));
  EXPECT_FALSE(f0.timed_out) << f0.err;
  EXPECT_FALSE(f2.timed_out) << f2.err;
  EXPECT_LT(std::chrono::steady_clock::now() - started, seconds(30));
  EXPECT_EQ(exit_code(f0), 1) << f0.err;
  EXPECT_NE(exit_code(f2), 0) << f2.err;  // the probe's uncaught error: SIGABRT

  const std::string why = "says the job has 6 ranks, node 0's store serves a job of 4 (2 nodes x 2 ranks per node): "
                          "give every launcher the same --nproc_per_node and --nnodes (or use --rdzv_endpoint for "
                          "nodes of different sizes)";
  const std::vector<std::string> lines0 = lines_of(f0.err);
  ASSERT_FALSE(lines0.empty());
  EXPECT_EQ(lines0.back().rfind("launch: the job cannot run: a rank at 127.0.0.1:", 0), 0u) << f0.err;
  EXPECT_NE(lines0.back().find(why), std::string::npos) << f0.err;
  // Its ranks were refused by that store at once (after proving the token: only a process
  // of the job may say what the job is), and say so.
  EXPECT_NE(f2.err.find("TCPStore: the store at 127.0.0.1:" + port +
                        " (run id two_shapes) refused this connection: a rank at 127.0.0.1:"),
            std::string::npos)
      << f2.err;
  EXPECT_NE(f2.err.find(why), std::string::npos) << f2.err;
  EXPECT_TRUE(no_orphan_running());
}

}  // namespace
}  // namespace testing
}  // namespace distcomm
