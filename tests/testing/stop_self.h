// Stops the calling process (SIGSTOP) for a while, as a frozen host, a debugger or Ctrl-Z
// would, and returns once it runs again: what a test of "a rank that stopped answering"
// needs on the rank that stops. A forked child sends the SIGCONT, since the stopped process
// cannot; the child makes only async-signal-safe calls (the parent has threads).
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

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

}  // namespace testing
}  // namespace distcomm
