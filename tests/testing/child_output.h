// What a function says when run in a forked child: for tests of what a process limit
// (setrlimit) or a signal does to the code under test, which must not touch the test
// process itself. The child returns fn()'s text, or "(threw) <what>" for an exception; the
// parent reads it through a pipe and says "(child killed by signal N)" where the child
// died instead (SIGXFSZ, SIGSEGV), which is what such tests look for.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <exception>
#include <functional>
#include <string>

namespace distcomm {
namespace testing {

inline std::string child_output(const std::function<std::string()>& fn) {
  int fds[2];
  if (::pipe(fds) != 0) return "(pipe failed)";
  const pid_t pid = ::fork();
  if (pid < 0) return "(fork failed)";
  if (pid == 0) {
    ::close(fds[0]);
    std::string out;
    try {
      out = fn();
    } catch (const std::exception& e) {
      out = std::string("(threw) ") + e.what();
    }
    (void)!::write(fds[1], out.data(), out.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof(buf))) > 0;) text.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) return "(child killed by signal " + std::to_string(WTERMSIG(status)) + ")";
  return text;
}

}  // namespace testing
}  // namespace distcomm
