// Starting a thread fails when the process has reached a limit on threads (ulimit -u,
// RLIMIT_NPROC, counted per user across every process; a container's pids.max) or on
// address space for the new thread's stack (ulimit -v). std::thread then throws a
// std::system_error that says only "Resource temporarily unavailable": no thread, no group,
// no limit to raise. start_thread says what the thread was for and which limits to look at;
// the core and the backends start their threads through it.
#pragma once

#include <cerrno>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

#include "api/errors.h"

namespace distcomm {

// "cannot start a thread for <what>: <why>; ..." (an Error: it is the machine's limit, not
// the program's argument). `what` names the thread's purpose and, where known, the group.
inline std::string thread_start_failure(const std::string& what, const std::system_error& e) {
  std::string text = "cannot start a thread for " + what + ": " + e.code().message();
  if (e.code().value() == EAGAIN || e.code().value() == ENOMEM) {
    text += " (this process, or this user's processes together, reached a limit on threads: raise `ulimit -u` "
            "(RLIMIT_NPROC) or the container's pids limit, or `ulimit -v` if set, or run fewer ranks or groups on "
            "this host)";
  }
  return text;
}

template <class F>
std::thread start_thread(const std::string& what, F&& body) {
  try {
    return std::thread(std::forward<F>(body));
  } catch (const std::system_error& e) {
    throw Error(thread_start_failure(what, e));
  }
}

}  // namespace distcomm
