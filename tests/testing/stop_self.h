// Stops the calling process (SIGSTOP) for a while, as a frozen host, a debugger or Ctrl-Z
// would, and returns once it runs again (and wait_until_stopped, for the others): what a test of "a rank that stopped answering"
// needs on the rank that stops. A forked child sends the SIGCONT, since the stopped process
// cannot; the child makes only async-signal-safe calls (the parent has threads).
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>

namespace distcomm {
namespace testing {

namespace stop_self_detail {

// Async-signal-safe sleep (nanosleep, resumed after a signal), for the forked children.
inline void sleep_for(std::chrono::milliseconds how_long) {
  timespec left{static_cast<time_t>(how_long.count() / 1000), static_cast<long>(how_long.count() % 1000) * 1000000L};
  while (::nanosleep(&left, &left) != 0 && errno == EINTR) {
  }
}

inline pid_t fork_or_throw() {
  const pid_t child = ::fork();
  if (child < 0) throw std::runtime_error(std::string("stop_self: fork failed: ") + std::strerror(errno));
  return child;
}

}  // namespace stop_self_detail

// Stops this process now for `how_long`; returns once it runs again. Throws where fork
// fails (a SIGSTOP with nobody to send the SIGCONT would stop the test for good).
inline void stop_self_for(std::chrono::milliseconds how_long) {
  const pid_t waker = stop_self_detail::fork_or_throw();
  if (waker == 0) {
    stop_self_detail::sleep_for(how_long);
    ::kill(::getppid(), SIGCONT);
    ::_exit(0);
  }
  ::raise(SIGSTOP);
  ::waitpid(waker, nullptr, 0);
}

// Stops this process `after` from now, for `how_long`, without holding up the caller (it
// stops wherever it then is, e.g. inside a wait). Returns the child that stops and resumes
// it: waitpid it once the process runs again.
inline pid_t stop_self_after(std::chrono::milliseconds after, std::chrono::milliseconds how_long) {
  const pid_t parent = ::getpid();
  const pid_t child = stop_self_detail::fork_or_throw();
  if (child == 0) {
    stop_self_detail::sleep_for(after);
    ::kill(parent, SIGSTOP);
    stop_self_detail::sleep_for(how_long);
    ::kill(parent, SIGCONT);
    ::_exit(0);
  }
  return child;
}

// Whether process `pid` (of this host) is stopped (state T or t in /proc/<pid>/stat) within
// `within`: for the ranks that must act only once another has stopped itself, rather than
// after a sleep that a loaded machine can make too short.
inline bool wait_until_stopped(pid_t pid, std::chrono::milliseconds within) {
  const auto until = std::chrono::steady_clock::now() + within;
  for (;;) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    const size_t paren = line.rfind(')');  // the name may hold spaces and parentheses
    if (paren != std::string::npos && paren + 2 < line.size()) {
      const char state = line[paren + 2];
      if (state == 'T' || state == 't') return true;
    }
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace testing
}  // namespace distcomm
