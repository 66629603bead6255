// ProcessWatch and ended_among (api/plugin/process_watch.h): which of several watched
// processes have ended, asked in one poll(), against real child processes: one killed,
// one reaped before its watch was opened (no pidfd: known gone), the others running.
#include "api/plugin/process_watch.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <vector>

#include <gtest/gtest.h>

namespace distcomm {
namespace {

pid_t sleeping_child() {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::pause();
    ::_exit(0);
  }
  return pid;
}

TEST(ProcessWatch, EndedAmongNamesTheEndedProcessesInOnePoll) {
  std::vector<pid_t> children{sleeping_child(), sleeping_child(), sleeping_child()};
  for (pid_t c : children) ASSERT_GT(c, 0);
  const pid_t reaped = ::fork();
  if (reaped == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(reaped, nullptr, 0), reaped);

  std::vector<ProcessWatch> watches;
  for (pid_t c : children) watches.emplace_back(c);
  watches.emplace_back(reaped);  // pidfd_open: no such process
  std::vector<const ProcessWatch*> all;
  for (const ProcessWatch& w : watches) all.push_back(&w);
  if (!watches[0].watching()) GTEST_SKIP() << "this kernel has no pidfd_open";
  EXPECT_TRUE(watches[3].watching());
  EXPECT_EQ(ended_among(all), (std::vector<size_t>{3})) << "only the reaped one has ended";

  ASSERT_EQ(::kill(children[1], SIGKILL), 0);
  EXPECT_TRUE(watches[1].ends_within(std::chrono::seconds(10)));
  EXPECT_EQ(ended_among(all), (std::vector<size_t>{1, 3}));
  EXPECT_EQ(ended_among({&watches[0], &watches[2]}), std::vector<size_t>{}) << "the running ones";

  for (pid_t c : children) {
    ::kill(c, SIGKILL);
    ::waitpid(c, nullptr, 0);
  }
  EXPECT_EQ(ended_among(all), (std::vector<size_t>{0, 1, 2, 3}));
}

}  // namespace
}  // namespace distcomm
