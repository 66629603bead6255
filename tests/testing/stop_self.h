// Stops the calling process (SIGSTOP) for a while, as a frozen host, a debugger or Ctrl-Z
// would, and returns once it runs again (and wait_until_stopped, for the others): what a test of "a rank that stopped answering"
// needs on the rank that stops. A forked child sends the SIGCONT, since the stopped process
// cannot; the child makes only async-signal-safe calls (the parent has threads).
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

namespace distcomm {
namespace testing {

inline void stop_self_for(std::chrono::seconds how_long) {
  const pid_t waker = ::fork();
  if (waker == 0) {
    ::sleep(static_cast<unsigned>(how_long.count()));
    ::kill(::getppid(), SIGCONT);
    ::_exit(0);
  }
  ::raise(SIGSTOP);
  if (waker > 0) ::waitpid(waker, nullptr, 0);
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
