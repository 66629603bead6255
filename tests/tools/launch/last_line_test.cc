// Every launcher of a job that succeeded ends with one line saying so (job_outcome.h): a
// static job's launchers ended silently, and node 0's launcher of a job that went on without
// a machine it lost (every launcher exited 0) said nothing of that machine: only the ranks'
// own lines told it. Real launchers, real ranks (shell commands), on this host as two
// machines.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <regex>
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

const std::vector<std::string> kEnv = {"DISTCOMM_STORE_TOKEN=last-line-test-token", "DISTCOMM_RUN_ID=last-line-test"};

std::string last_line(const std::string& text) {
  const std::vector<std::string> lines = lines_of(text);
  return lines.empty() ? "" : lines.back();
}

std::unique_ptr<Subprocess> node(int node_rank, int nproc, int port, const std::vector<std::string>& extra,
                                 const std::string& script) {
  std::vector<std::string> flags = {"--nnodes=2", "--node_rank=" + std::to_string(node_rank),
                                    "--nproc_per_node=" + std::to_string(nproc), "--master_port=" + std::to_string(port)};
  flags.insert(flags.end(), extra.begin(), extra.end());
  return std::make_unique<Subprocess>(launch(flags, {"/bin/sh", "-c", script}), kEnv, /*merge_stderr=*/true);
}

// Both launchers of a static job whose ranks exit 0 end with the job's success, each naming
// its own ranks and machine (before: nothing at all).
TEST(LastLine, EveryLauncherOfAStaticJobThatSucceededSaysSo) {
  const int port = local::pick_free_port();
  std::unique_ptr<Subprocess> n0 = node(0, 2, port, {}, "exit 0");
  std::unique_ptr<Subprocess> n1 = node(1, 2, port, {}, "exit 0");
  const Finished f0 = n0->finish(seconds(60));
  const Finished f1 = n1->finish(seconds(60));
  EXPECT_EQ(exit_code(f0), 0) << f0.out;
  EXPECT_EQ(exit_code(f1), 0) << f1.out;
  EXPECT_TRUE(std::regex_match(
      last_line(f0.out),
      std::regex(R"(launch: the job succeeded: ranks 0-1 of 4 on this machine \(node 0 of 2\) exited 0 after \d+\.\d s)")))
      << f0.out;
  EXPECT_TRUE(std::regex_match(
      last_line(f1.out),
      std::regex(R"(launch: the job succeeded: ranks 2-3 of 4 on this machine \(node 1 of 2\) exited 0 after \d+\.\d s)")))
      << f1.out;
  EXPECT_TRUE(no_orphan_running());
}

// A fault-tolerant job's configuration (--on_failure=continue --replace_after_s): node 1's
// launcher and its rank are SIGKILLed (the machine is lost); node 0's rank goes on and exits
// 0. Node 0's launcher exits 0, its last line naming the machine lost: which node, its
// ranks, host and launcher pid, and when it was last seen.
TEST(LastLine, ALauncherWhoseJobWentOnWithoutALostMachineNamesIt) {
  const int port = local::pick_free_port();
  const std::string go_on = temp_path("node1_lost");
  const std::vector<std::string> ft = {"--on_failure=continue", "--replace_after_s=1"};
  // Node 0's rank ends (0) once the test has killed node 1: a file, waited for 60 s at most.
  std::unique_ptr<Subprocess> n0 =
      node(0, 1, port, ft, "for i in $(seq 1200); do [ -e '" + go_on + "' ] && exit 0; sleep 0.05; done; exit 1");
  std::unique_ptr<Subprocess> n1 = node(1, 1, port, ft, "echo ready $$; exec sleep 300");
  ASSERT_TRUE(n1->wait_for_stdout("ready ", 1, seconds(60))) << n1->stdout_so_far();
  std::smatch rank_pid;
  const std::string so_far = n1->stdout_so_far();
  ASSERT_TRUE(std::regex_search(so_far, rank_pid, std::regex(R"(ready (\d+))"))) << so_far;
  const pid_t launcher1 = n1->pid();
  // The whole machine: its launcher and its rank (which leads its own process group).
  n1->send_signal(SIGKILL);
  ::kill(-std::stoi(rank_pid[1].str()), SIGKILL);
  const Finished gone = n1->finish(seconds(30));
  std::ofstream(go_on) << "go on";
  const Finished f0 = n0->finish(seconds(90));
  EXPECT_EQ(exit_code(f0), 0) << f0.out;
  const std::string expected = R"(launch: the job succeeded: rank 0 of 2 on this machine \(node 0 of 2\) exited 0 after \d+\.\d s; )"
                               R"(it went on after node 1 \(rank 1 on [^,]+, launcher pid )" +
                               std::to_string(launcher1) +
                               R"(\) was lost: its launcher went silent without saying that its ranks ended, )"
                               R"(last seen \d+\.\d s into the job)";
  EXPECT_TRUE(std::regex_match(last_line(f0.out), std::regex(expected))) << f0.out;
  EXPECT_TRUE(no_orphan_running());
}

}  // namespace
}  // namespace testing
}  // namespace distcomm
