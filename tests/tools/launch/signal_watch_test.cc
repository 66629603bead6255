// The launcher's signal watch (launch/signal_watch.h), in this process with real signals and
// real senders: a flood of another signal that fills the watch's pipe does not hide a
// stopping signal or its sender; a sender that exits (and is reaped) before the reader runs
// is named from what the handler read; a process that started after the signal came, at
// the sender's pid, is never named as the sender; a handler still running on another thread
// as the watch ends writes nothing into a descriptor opened after it.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "launch/signal_watch.h"

namespace distcomm {
namespace testing {
namespace {

using Clock = std::chrono::steady_clock;

size_t count_of(const std::vector<int>& sigs, int sig) {
  return static_cast<size_t>(std::count(sigs.begin(), sigs.end(), sig));
}

std::string own_command() {
  std::ifstream in("/proc/self/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

std::string stat_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

unsigned long long boot_ticks_now() {
  timespec now{};
  ::clock_gettime(CLOCK_BOOTTIME, &now);
  return launch::boot_ticks(static_cast<long long>(now.tv_sec) * 1000000000LL + now.tv_nsec);
}

// Until `fd` is readable, or `wait`: the signal that makes it so interrupts poll (EINTR).
bool readable_within(int fd, std::chrono::milliseconds wait) {
  const Clock::time_point until = Clock::now() + wait;
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) == 1) return true;
  }
}

// take() until `sig` has come `times` times, or 5 s: a signal sent to this process may be
// handled on another thread a moment later; the pipe, full, cannot say when.
std::vector<int> take_until(launch::SignalWatch& watch, int sig, size_t times) {
  std::vector<int> all;
  const Clock::time_point until = Clock::now() + std::chrono::seconds(5);
  while (count_of(all, sig) < times && Clock::now() < until) {
    const std::vector<int> some = watch.take();
    all.insert(all.end(), some.begin(), some.end());
    if (count_of(all, sig) < times) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return all;
}

// A burst of SIGUSR1 (or SIGCHLD) while the reader is busy filled the pipe: the SIGTERM
// after it was dropped with its record (the review's ~5,400 pending records), and the
// launcher would not have stopped. Each SIGTERM is there, with its sender.
TEST(SignalWatch, AFloodOfAnotherSignalThatFillsThePipeDoesNotHideASigterm) {
  launch::SignalWatch watch;
  const int room = ::fcntl(watch.fd(), F_GETPIPE_SZ);
  ASSERT_GT(room, 0);
  int queued = 0;
  // Nobody reads meanwhile: SIGUSR1s until the pipe is full (each record is a byte at least).
  for (int sent = 0; sent < 4 * room; ++sent) {
    ::kill(::getpid(), SIGUSR1);
    if (sent % 256 == 0 && ::ioctl(watch.fd(), FIONREAD, &queued) == 0 && queued >= room) break;
  }
  ASSERT_EQ(::ioctl(watch.fd(), FIONREAD, &queued), 0);
  ASSERT_GE(queued, room - 64) << "the pipe was to be full before the SIGTERM";
  ::kill(::getpid(), SIGTERM);
  ::kill(::getpid(), SIGTERM);  // a repeat: the attempt counts it (impatience)
  const std::vector<int> sigs = take_until(watch, SIGTERM, 2);
  EXPECT_EQ(count_of(sigs, SIGTERM), 2u) << "SIGTERM lost behind " << count_of(sigs, SIGUSR1) << " SIGUSR1";
  EXPECT_GE(count_of(sigs, SIGUSR1), 1u);
  const std::optional<launch::SignalSender> sender = watch.sender_of(SIGTERM);
  ASSERT_TRUE(sender.has_value());
  EXPECT_EQ(sender->pid, ::getpid());
  EXPECT_EQ(sender->uid, ::getuid());
  EXPECT_EQ(sender->code, SI_USER);
  EXPECT_EQ(sender->command, own_command());
  EXPECT_FALSE(sender->exited);
  // Drained: the next signal is read as ever, and the taken ones are not given again.
  ::kill(::getpid(), SIGINT);
  const std::vector<int> after = take_until(watch, SIGINT, 1);
  EXPECT_EQ(after, std::vector<int>{SIGINT});
}

// kill(1) or pkill sends and exits at once: its pid is free (or another's) by the time the
// launcher reads who sent the signal. The handler reads the sender's /proc/<pid>/stat as it
// runs, so the sender, reaped before take(), is still named (its command was read after the
// handler returned, so the name was "" here -- or another process's, once the pid was reused).
TEST(SignalWatch, ASenderThatExitedBeforeItsSignalWasTakenIsStillNamed) {
  launch::SignalWatch watch;
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::prctl(PR_SET_NAME, "stop_sender");
    ::kill(parent, SIGTERM);
    ::_exit(0);
  }
  // Reaped only once the handler has run (its byte is on the pipe): waitpid may reap an
  // exited child before this thread runs the handler of a signal already pending.
  ASSERT_TRUE(readable_within(watch.fd(), std::chrono::seconds(5))) << "no signal within 5 s";
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  const std::vector<int> sigs = take_until(watch, SIGTERM, 1);
  ASSERT_EQ(count_of(sigs, SIGTERM), 1u);
  const std::optional<launch::SignalSender> sender = watch.sender_of(SIGTERM);
  ASSERT_TRUE(sender.has_value());
  EXPECT_EQ(sender->pid, child);
  EXPECT_EQ(sender->command, "stop_sender");
  EXPECT_EQ(launch::sender_text(*sender), "pid " + std::to_string(child) + " (stop_sender, uid " +
                                              std::to_string(::getuid()) + ")");
}

// The first sender stands: a second SIGTERM from this process does not replace the child's.
TEST(SignalWatch, TheFirstSenderOfASignalIsKept) {
  launch::SignalWatch watch;
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::prctl(PR_SET_NAME, "first_sender");
    ::kill(parent, SIGTERM);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ::kill(::getpid(), SIGTERM);
  EXPECT_EQ(count_of(take_until(watch, SIGTERM, 2), SIGTERM), 2u);
  ASSERT_TRUE(watch.sender_of(SIGTERM).has_value());
  EXPECT_EQ(watch.sender_of(SIGTERM)->pid, child);
  EXPECT_FALSE(watch.sender_of(SIGINT).has_value()) << "none was taken";
}

std::atomic<int> g_late_pipe_writes{0};  // SIGPIPEs: writes into a pipe with no reader left

// The handler runs on whichever thread the signal lands on (the launcher's store, watch and
// output threads leave these signals unblocked). One that had read the pipe's write end as
// the watch ended wrote its byte after the watch closed the pipe: into a pipe with no reader
// (SIGPIPE, whose default action, restored by then, ends the launcher), or into whatever took
// the write end's number next, such as a store's fresh socket. Threads here flood SIGUSR1 at
// themselves (raise(): the handler runs on the flooding thread) while watches come and go;
// right after each watch ends a socket pair is opened (it takes the pipe's numbers), and
// once every flooder has come back from two more signals -- so no handler that may have
// started before the end is still running -- neither socket may have received a byte.
TEST(SignalWatch, AHandlerRunningOnAnotherThreadAsTheWatchEndsWritesIntoNoDescriptorOpenedAfter) {
  // Between watches SIGUSR1 comes here: its default action ends the process.
  struct sigaction quiet;
  struct sigaction before;
  std::memset(&quiet, 0, sizeof(quiet));
  quiet.sa_handler = [](int) {};
  sigemptyset(&quiet.sa_mask);
  ASSERT_EQ(::sigaction(SIGUSR1, &quiet, &before), 0);
  // A late byte into the pipe whose read end the watch had just closed raises SIGPIPE on the
  // writing thread: its default action ended this test at once (exit 141). Counted instead.
  struct sigaction count_pipe;
  struct sigaction pipe_before;
  std::memset(&count_pipe, 0, sizeof(count_pipe));
  count_pipe.sa_handler = [](int) { g_late_pipe_writes.fetch_add(1); };
  sigemptyset(&count_pipe.sa_mask);
  g_late_pipe_writes.store(0);
  ASSERT_EQ(::sigaction(SIGPIPE, &count_pipe, &pipe_before), 0);
  constexpr int kFlooders = 3;
  std::atomic<bool> done{false};
  std::atomic<unsigned long> raised[kFlooders];
  for (std::atomic<unsigned long>& r : raised) r.store(0);
  std::vector<std::thread> flooders;
  for (int t = 0; t < kFlooders; ++t) {
    flooders.emplace_back([&, t] {
      while (!done.load()) {
        ::raise(SIGUSR1);
        raised[t].fetch_add(1);
      }
    });
  }
  int rounds = 0;
  int reused = 0;       // rounds whose socket pair took a number the watch's pipe had held
  int stray_bytes = 0;  // bytes those sockets received, none of their own
  bool flooders_stuck = false;
  const Clock::time_point until = Clock::now() + std::chrono::seconds(3);
  while (rounds < 20000 && Clock::now() < until && !flooders_stuck) {
    std::set<int> pipe_fds;
    {
      launch::SignalWatch watch;
      // pipe2 takes the two lowest free numbers: the read end and, next, the write end.
      pipe_fds = {watch.fd(), watch.fd() + 1};
      if (rounds % 2 == 1) (void)watch.take();
    }
    int pair[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair), 0);
    ++rounds;
    if (pipe_fds.count(pair[0]) != 0 || pipe_fds.count(pair[1]) != 0) ++reused;
    unsigned long seen[kFlooders];
    for (int t = 0; t < kFlooders; ++t) seen[t] = raised[t].load();
    const Clock::time_point wait_until = Clock::now() + std::chrono::seconds(5);
    for (int t = 0; t < kFlooders && !flooders_stuck; ++t) {
      while (raised[t].load() < seen[t] + 2) {
        if (Clock::now() >= wait_until) {
          flooders_stuck = true;
          break;
        }
        std::this_thread::yield();
      }
    }
    char buf[64];
    for (int end : pair) {
      const ssize_t n = ::recv(end, buf, sizeof(buf), MSG_DONTWAIT);
      if (n > 0) stray_bytes += static_cast<int>(n);
      ::close(end);
    }
  }
  done.store(true);
  for (std::thread& f : flooders) f.join();
  ::sigaction(SIGUSR1, &before, nullptr);
  ::sigaction(SIGPIPE, &pipe_before, nullptr);
  EXPECT_FALSE(flooders_stuck) << "a flooding thread made no progress for 5 s";
  EXPECT_EQ(g_late_pipe_writes.load(), 0) << "handlers wrote into a watch's pipe after it closed the read end ("
                                          << g_late_pipe_writes.load() << " SIGPIPEs in " << rounds << " rounds)";
  EXPECT_EQ(stray_bytes, 0) << stray_bytes << " bytes written into sockets opened after their watch ended, in "
                            << rounds << " rounds";
  EXPECT_GT(reused, rounds / 2) << "the sockets were to take the pipe's numbers, so that a late write can land there";
  std::cerr << rounds << " rounds, " << reused << " reused the pipe's numbers\n";
}

TEST(SignalWatch, ProcessStatReadsTheCommandAndTheStartTime) {
  // Fields 3 to 21, then 22 (start time) = 98765, then more.
  std::string rest;
  for (int field = 3; field <= 21; ++field) rest += " " + std::to_string(field);
  const std::optional<launch::ProcessStat> p = launch::parse_process_stat("4711 (a) b (c)" + rest + " 98765 1 2\n");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->command, "a) b (c");
  EXPECT_EQ(p->start_ticks, 98765u);
  EXPECT_FALSE(launch::parse_process_stat("").has_value());
  EXPECT_FALSE(launch::parse_process_stat("4711 (short) S 1 2 3").has_value());
  const std::optional<launch::ProcessStat> self = launch::parse_process_stat(stat_of(::getpid()));
  ASSERT_TRUE(self.has_value());
  EXPECT_EQ(self->command, own_command());
  EXPECT_LE(self->start_ticks, boot_ticks_now());
}

// A process that started after the signal came holds a pid that was the sender's: it is not
// named (a reused pid named "pid 4711 (bash, uid 0)" for a signal slurmstepd sent).
TEST(SignalWatch, AProcessThatStartedAfterTheSignalIsNotNamedAsItsSender) {
  EXPECT_TRUE(launch::could_have_sent(100, 200));
  EXPECT_TRUE(launch::could_have_sent(200, 200)) << "the same tick: a kill(1) run and sent within it";
  EXPECT_FALSE(launch::could_have_sent(201, 200));

  std::string rest;
  for (int field = 3; field <= 21; ++field) rest += " 0";
  const std::string stepd = "4711 (slurmstepd) S" + rest.substr(2) + " 300 0\n";
  EXPECT_EQ(launch::identify_sender(4711, 0, SI_USER, 300, stepd).command, "slurmstepd");
  const launch::SignalSender reused = launch::identify_sender(4711, 0, SI_USER, 299, stepd);
  EXPECT_EQ(reused.command, "");
  EXPECT_TRUE(reused.exited);
  EXPECT_EQ(launch::sender_text(reused), "pid 4711 (exited, uid 0)");

  // A real process at the pid, read from /proc now: named only if it started by the arrival.
  int gate[2];
  ASSERT_EQ(::pipe(gate), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(gate[1]);
    char byte;
    (void)!::read(gate[0], &byte, 1);  // until the test closes its end
    ::_exit(0);
  }
  ::close(gate[0]);
  const std::optional<launch::ProcessStat> started = launch::parse_process_stat(stat_of(child));
  ASSERT_TRUE(started.has_value());
  const launch::SignalSender before = launch::identify_sender(child, 0, SI_USER, started->start_ticks - 1, "");
  EXPECT_TRUE(before.exited) << "it started a tick after the signal came";
  EXPECT_EQ(before.command, "");
  const launch::SignalSender by = launch::identify_sender(child, 0, SI_USER, started->start_ticks, "");
  EXPECT_FALSE(by.exited);
  EXPECT_EQ(by.command, started->command);
  ::close(gate[1]);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  // Gone and reaped: no process at the pid (kill: ESRCH), so the sender exited.
  const launch::SignalSender gone = launch::identify_sender(child, 0, SI_USER, boot_ticks_now(), "");
  EXPECT_TRUE(gone.exited);
  EXPECT_EQ(launch::sender_text(gone), "pid " + std::to_string(child) + " (exited, uid 0)");
}

}  // namespace
}  // namespace testing
}  // namespace distcomm
