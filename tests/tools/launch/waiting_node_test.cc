// In a static job across machines, a launcher other than node 0's waits for node 0's store
// before it starts its ranks (it checks the job's shape there): while node 0's machine is
// not up, it said nothing for a minute (only node 0's launcher said what it waited for). It
// now says every 30 s what it waits for.
#include <signal.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "api/process/local_processes.h"
#include "tests/tools/launch/launcher_harness.h"

namespace distcomm {
namespace testing {
namespace {

using std::chrono::seconds;

const auto* const kAdoptOrphans = ::testing::AddGlobalTestEnvironment(new AdoptOrphans);

TEST(WaitingNode, ALauncherWaitingForNode0SaysWhatItWaitsFor) {
  const std::string port = std::to_string(local::pick_free_port());  // nobody serves it
  Subprocess n1(launch({"--nnodes=2", "--node_rank=1", "--nproc_per_node=1", "--master_port=" + port},
                       {"/bin/sh", "-c", "exit 0"}),
                {"DISTCOMM_STORE_TOKEN=waiting-node-token", "DISTCOMM_RUN_ID=waiting-node"}, /*merge_stderr=*/true);
  const std::string said = "launch: waiting for node 0's launcher: its store at 127.0.0.1:" + port +
                           " has not answered for 30 s (this launcher checks there that it runs the job's --nnodes "
                           "and --nproc_per_node before it starts its ranks)\n";
  // Said at 30 s; the launcher gives the check up at 60 s.
  EXPECT_TRUE(n1.wait_for_stdout(said, 1, seconds(55))) << n1.stdout_so_far();
  n1.send_signal(SIGTERM);
  const Finished f = n1.finish(seconds(30));
  EXPECT_EQ(f.out.find("[rank"), std::string::npos) << "no rank may have started:\n" << f.out;
  EXPECT_TRUE(no_orphan_running());
}

}  // namespace
}  // namespace testing
}  // namespace distcomm
