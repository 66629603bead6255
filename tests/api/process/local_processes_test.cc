// The processes of a job on this machine (api/process/local_processes.h), which spawn(), the
// launcher and the test harness share: real forks, real signals, bounded waits.
#include <signal.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

#include "api/process/local_processes.h"

namespace distcomm {
namespace local {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

TEST(LocalProcesses, WaitStatusesReadAsTheShellSaysThem) {
  EXPECT_EQ(describe_wait_status(3 << 8), "exit code 3");
  EXPECT_EQ(describe_wait_status(SIGKILL), "signal SIGKILL (Killed)");
  EXPECT_EQ(signal_name(SIGRTMIN + 3), "SIGRTMIN+3");
  EXPECT_EQ(shell_exit_code(SIGKILL), 128 + SIGKILL);
  EXPECT_EQ(shell_exit_code(3 << 8), 3);
  EXPECT_TRUE(exited_cleanly(0));
  EXPECT_FALSE(exited_cleanly(SIGTERM));
}

TEST(LocalProcesses, AFreePortCanBeBound) {
  const int port = pick_free_port();
  ASSERT_GT(port, 0);
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ::close(fd);
}

TEST(LocalProcesses, ChildrenReportWhatTheyReturnOrThrow) {
  ChildSet children;
  children.add(fork_child([] { return std::string(); }));
  children.add(fork_child([] { return std::string("rank 1 saw a mismatch"); }));
  children.add(fork_child([]() -> std::string { throw std::invalid_argument("bad input"); }));
  children.add(fork_child([]() -> std::string { ::_exit(7); }));
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (children.running() > 0 && Clock::now() < deadline) children.poll(milliseconds(1000));
  ASSERT_EQ(children.running(), 0);
  EXPECT_TRUE(exited_cleanly(children[0].status));
  EXPECT_EQ(children[0].report, "");
  EXPECT_EQ(describe_wait_status(children[1].status), "exit code 1");
  EXPECT_EQ(children[1].report, "rank 1 saw a mismatch");
  const auto thrown = FailureReport::decode(children[2].report);
  ASSERT_TRUE(thrown.has_value()) << children[2].report;
  EXPECT_EQ(thrown->message, "std::invalid_argument: bad input");
  EXPECT_GT(thrown->unix_time_ns, 0);
  EXPECT_EQ(describe_wait_status(children[3].status), "exit code 7");
}

// pidfds: the parent sleeps until the child exits, and wakes at once when it does.
TEST(LocalProcesses, PollWakesWhenAChildExits) {
  ChildSet children;
  children.add(fork_child([] {
    std::this_thread::sleep_for(milliseconds(200));
    return std::string();
  }));
  const auto start = Clock::now();
  std::vector<size_t> exited;
  while (exited.empty() && seconds_since(start) < 30) exited = children.poll(milliseconds(20000));
  ASSERT_EQ(exited, std::vector<size_t>{0});
  EXPECT_GE(seconds_since(start), 0.19);
  EXPECT_LT(seconds_since(start), 5.0) << "slept past the child's exit";
}

// A child that has died but is not yet reaped when the set is told to stop (two ranks that
// die together: the second's exit comes between the poll that saw the first and the stop)
// is not marked stopped: its failure is its own. The next poll returns it as exited.
TEST(LocalProcesses, AChildDeadBeforeTheStopIsNotMarkedStopped) {
  ChildSet children;
  children.add(fork_child([] {
    for (;;) ::pause();
    return std::string();
  }));
  children.add(fork_child([]() -> std::string { ::_exit(3); }));
  siginfo_t info{};
  // Until the second has exited, without reaping it (it stays a zombie for the set).
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(children[1].pid), &info, WEXITED | WNOWAIT), 0);
  children.mark_stopped();
  EXPECT_TRUE(children[0].stopped);
  EXPECT_FALSE(children[1].stopped) << "it died before the stop: its failure is its own";
  EXPECT_FALSE(children[1].running);
  EXPECT_EQ(describe_wait_status(children[1].status), "exit code 3");
  EXPECT_EQ(children.poll(milliseconds(0)), std::vector<size_t>{1}) << "the next poll returns it";
  children.kill_all();
}

// A child that ignores SIGTERM is killed once the grace is over: not before, not much after.
TEST(LocalProcesses, StopGivesTheGraceThenKills) {
  ChildSet children;
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  children.add(fork_child([&] {
    ::signal(SIGTERM, SIG_IGN);
    ::write(ready[1], "x", 1);
    for (;;) ::pause();
    return std::string();
  }));
  children.add(fork_child([&] {
    ::write(ready[1], "x", 1);
    for (;;) ::pause();
    return std::string();
  }));
  char buf[2];
  ASSERT_EQ(::read(ready[0], buf, 1) + ::read(ready[0], buf + 1, 1), 2);  // both handlers set
  const auto start = Clock::now();
  children.stop(milliseconds(700));
  const double took = seconds_since(start);
  EXPECT_EQ(children.running(), 0);
  EXPECT_EQ(describe_wait_status(children[0].status), "signal SIGKILL (Killed)");
  EXPECT_EQ(describe_wait_status(children[1].status), "signal SIGTERM (Terminated)");
  EXPECT_GE(took, 0.69);
  EXPECT_LT(took, 5.0);
  ::close(ready[0]);
  ::close(ready[1]);
}

// A child leading its own group is signalled as a group: what it started goes too.
TEST(LocalProcesses, AGroupLeaderIsSignalledWithItsGroup) {
  int pids[2];
  ASSERT_EQ(::pipe(pids), 0);
  const pid_t leader = ::fork();
  if (leader == 0) {
    ::setpgid(0, 0);
    const pid_t grandchild = ::fork();
    if (grandchild == 0) {
      for (;;) ::pause();
    }
    ::write(pids[1], &grandchild, sizeof(grandchild));
    for (;;) ::pause();
  }
  ::setpgid(leader, leader);
  pid_t grandchild = -1;
  ASSERT_EQ(::read(pids[0], &grandchild, sizeof(grandchild)), static_cast<ssize_t>(sizeof(grandchild)));
  ChildSet children;
  children.add(watched_child(leader, -1, /*own_group=*/true));
  children.kill_all();
  EXPECT_EQ(describe_wait_status(children[0].status), "signal SIGKILL (Killed)");
  // The grandchild is init's (or a subreaper's) to reap; it must be dead or a zombie.
  bool gone = false;
  for (int i = 0; i < 500 && !gone; ++i) {
    gone = ::kill(grandchild, 0) != 0;
    if (!gone) {
      char state = '?';
      if (FILE* f = std::fopen(("/proc/" + std::to_string(grandchild) + "/stat").c_str(), "r")) {
        std::fscanf(f, "%*d %*s %c", &state);
        std::fclose(f);
      }
      gone = state == 'Z' || state == '?';
    }
    if (!gone) std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_TRUE(gone) << "the leader's group was not signalled";
  ::close(pids[0]);
  ::close(pids[1]);
}

}  // namespace
}  // namespace local
}  // namespace distcomm
