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

}  // namespace
}  // namespace testing
}  // namespace distcomm
