// Static jobs across machines whose launchers disagree on the job's shape: node 0's
// launcher serves the store for nnodes x its --nproc_per_node ranks, and refuses a rank
// that counts another world size. Without that check, each side waited for a rank the
// other never starts, for the whole group timeout (30 minutes), saying nothing of why.
#include <unistd.h>

#include <gtest/gtest.h>

#include "api/process/local_processes.h"
#include "tests/tools/launch/launcher_harness.h"

namespace distcomm {
namespace testing {
namespace {

using std::chrono::seconds;

const auto* const kAdoptOrphans = ::testing::AddGlobalTestEnvironment(new AdoptOrphans);

// Node 0 (2 ranks a node) and node 1 (3 ranks a node) of a 2-node job: worlds of 4 and 6.
TEST(NodeShape, LaunchersGivenAnotherNprocPerNodeEndAtOnceSayingBothCounts) {
  const std::string port = std::to_string(local::pick_free_port());
  const std::vector<std::string> env = {"DISTCOMM_PLUGIN_PATH=" + runfile("tests/api/plugins"),
                                        "DISTCOMM_RUN_ID=two_shapes", "DISTCOMM_STORE_TOKEN=secret"};
  auto node = [&](int rank, int nproc) {
    return launch({"--nnodes=2", "--node_rank=" + std::to_string(rank), "--nproc_per_node=" + std::to_string(nproc),
                   "--master_port=" + port, "--backend=any_size"},
                  {runfile("tests/tools/launch/ordered_probe")});
  };
  const auto started = std::chrono::steady_clock::now();
  Subprocess node1(node(1, 3), env);
  ::usleep(300000);  // node 1's ranks wait for node 0's store meanwhile
  Subprocess node0(node(0, 2), env);
  // Well within the 30-minute group timeout the ranks had waited before.
  const Finished f0 = node0.finish(seconds(30));
  const Finished f1 = node1.finish(seconds(30));
  EXPECT_FALSE(f0.timed_out) << f0.err;
  EXPECT_FALSE(f1.timed_out) << f1.err;
  EXPECT_LT(std::chrono::steady_clock::now() - started, seconds(30));
  EXPECT_EQ(exit_code(f0), 1) << f0.err;
  EXPECT_NE(exit_code(f1), 0) << f1.err;  // the probe's uncaught error: SIGABRT

  const std::string why = "says the job has 6 ranks (with 2 nodes: 3 per node), node 0's store serves a job of 4 "
                          "(2 nodes x 2 per node): give every launcher the same --nproc_per_node and --nnodes (or "
                          "use --rdzv_endpoint for nodes of different sizes)";
  // Node 0's launcher stopped its ranks, which waited for rank 2, and its last line says why.
  const std::vector<std::string> lines0 = lines_of(f0.err);
  ASSERT_FALSE(lines0.empty());
  EXPECT_EQ(lines0.back().rfind("launch: the job cannot run: a rank at 127.0.0.1:", 0), 0u) << f0.err;
  EXPECT_NE(lines0.back().find(why), std::string::npos) << f0.err;
  // Node 1's ranks were refused by that store at once (after proving the token: only a
  // process of the job may say what the job is), and say so.
  EXPECT_NE(f1.err.find("TCPStore: the store at 127.0.0.1:" + port +
                        " (run id two_shapes) refused this connection: a rank at 127.0.0.1:"),
            std::string::npos)
      << f1.err;
  EXPECT_NE(f1.err.find(why), std::string::npos) << f1.err;
  EXPECT_TRUE(no_orphan_running());
}

}  // namespace
}  // namespace testing
}  // namespace distcomm
