// The launcher itself stopped (SIGSTOP: a debugger, a frozen node) for longer than the
// fault-tolerant ranks' recovery_timeout: the job's store it serves answers nothing, every
// member takes itself for lost and exits. Once continued, the launcher's last line names its
// own stop as what the job failed after, not only the rank that exited first.
#include <signal.h>

#include <chrono>
#include <regex>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "api/process/local_processes.h"
#include "tests/tools/launch/launcher_harness.h"

namespace distcomm {
namespace testing {
namespace {

const auto* const kAdoptOrphans = ::testing::AddGlobalTestEnvironment(new AdoptOrphans);

std::string last_line(const std::string& text) {
  const std::vector<std::string> lines = lines_of(text);
  return lines.empty() ? "" : lines.back();
}

void stop_the_launcher_while_it_trains(const std::vector<std::string>& flags, Finished* f) {
  std::vector<std::string> command = {runfile("examples/ft_train"), "--steps=100000000", "--log_every=1",
                                      "--recovery_timeout_s=2"};
  Subprocess launcher(launch(flags, command), {}, /*merge_stderr=*/true);
  ASSERT_TRUE(launcher.wait_for_stdout("step ", 2, std::chrono::seconds(60))) << launcher.stdout_so_far();
  ASSERT_EQ(::kill(launcher.pid(), SIGSTOP), 0);
  // Twice the recovery_timeout and more: every member gives up while the launcher is stopped.
  std::this_thread::sleep_for(std::chrono::seconds(6));
  ASSERT_EQ(::kill(launcher.pid(), SIGCONT), 0);
  *f = launcher.finish(std::chrono::seconds(30));
}

const std::regex kNamesTheStop(
    R"(^launch: the job failed after the launcher itself was stopped for \d+(\.\d)? s \(SIGSTOP/SIGCONT\), and the )"
    R"(job's store it serves did not answer meanwhile; the first failure seen after: rank \d \(local rank \d, pid \d+\) )");

TEST(LauncherStop, AJobThatFailsWhileTheLauncherIsStoppedNamesTheStopInItsLastLine) {
  Finished f;
  stop_the_launcher_while_it_trains({"--nproc_per_node=2", "--grace_period_s=1"}, &f);
  ASSERT_FALSE(f.timed_out) << f.out;
  EXPECT_NE(exit_code(f), 0) << f.out;
  EXPECT_TRUE(std::regex_search(last_line(f.out), kNamesTheStop)) << f.out;
  // Said once, when continued, as well.
  EXPECT_NE(f.out.find("\nlaunch: the launcher itself was stopped for "), std::string::npos) << f.out;
  EXPECT_TRUE(no_orphan_running());
}

// --on_failure=continue (the issue's command line: the ranks run on): the same last line.
TEST(LauncherStop, AContinuingJobNamesTheStopInItsLastLineToo) {
  Finished f;
  stop_the_launcher_while_it_trains({"--nproc_per_node=2", "--on_failure=continue", "--grace_period_s=1"}, &f);
  ASSERT_FALSE(f.timed_out) << f.out;
  EXPECT_NE(exit_code(f), 0) << f.out;
  EXPECT_TRUE(std::regex_search(last_line(f.out), kNamesTheStop)) << f.out;
  EXPECT_TRUE(no_orphan_running());
}

// A static job on two machines (two launchers on 127.0.0.1): node 0's launcher serves the
// job's store, node 1's does not. Node 1's launcher stopped alone (its rank runs on) says
// it was stopped, never that "the job's store it serves" was silent: a probe found it
// claiming node 0's store as its own.
TEST(LauncherStop, AnotherMachinesLauncherDoesNotClaimTheStore) {
  const std::string port = std::to_string(local::pick_free_port());
  const std::vector<std::string> env = {"DISTCOMM_RUN_ID=stop_node1", "DISTCOMM_STORE_TOKEN=secret"};
  auto node = [&](int node_rank) {
    return launch({"--nnodes=2", "--node_rank=" + std::to_string(node_rank), "--nproc_per_node=1",
                   "--master_port=" + port},
                  {"/bin/sh", "-c", "echo up; sleep 6; echo done"});
  };
  Subprocess node0(node(0), env);
  Subprocess node1(node(1), env, /*merge_stderr=*/true);
  ASSERT_TRUE(node1.wait_for_stdout("[rank 1] up", 1, std::chrono::seconds(30))) << node1.stdout_so_far();
  ASSERT_EQ(::kill(node1.pid(), SIGSTOP), 0);
  std::this_thread::sleep_for(std::chrono::seconds(2));  // past kStopGap (1 s): a stop
  ASSERT_EQ(::kill(node1.pid(), SIGCONT), 0);
  const Finished f1 = node1.finish(std::chrono::seconds(30));
  const Finished f0 = node0.finish(std::chrono::seconds(30));
  EXPECT_EQ(exit_code(f0), 0) << f0.err;
  EXPECT_EQ(exit_code(f1), 0) << f1.out;
  EXPECT_NE(f1.out.find("launch: the launcher itself was stopped for "), std::string::npos) << f1.out;
  EXPECT_EQ(f1.out.find("store it serves"), std::string::npos) << f1.out;
  EXPECT_NE(f1.out.find("the job's store on node 0"), std::string::npos) << f1.out;
  EXPECT_TRUE(no_orphan_running());
}

}  // namespace
}  // namespace testing
}  // namespace distcomm
