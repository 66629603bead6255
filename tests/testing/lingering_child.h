// A child that outlives the process that forks it, holding copies of all its descriptors
// (its sockets too), as a data loader worker or a system() child of a dead rank does: the
// connections of the dead process stay open until the child exits.
#pragma once

#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <chrono>

namespace distcomm {
namespace testing {

// Forks the child, which waits for this process to die, then `linger` more, then exits.
// Only async-signal-safe calls in the child: the parent has threads. Returns the child's
// pid in the parent (-1: fork failed).
inline pid_t fork_a_child_that_lingers(std::chrono::seconds linger) {
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  if (child != 0) return child;
  const timespec tick{0, 10 * 1000 * 1000};
  while (::getppid() == parent) ::nanosleep(&tick, nullptr);
  const timespec rest{static_cast<time_t>(linger.count()), 0};
  ::nanosleep(&rest, nullptr);
  ::_exit(0);
}

}  // namespace testing
}  // namespace distcomm
