// spawn: fork-based, like torch.multiprocessing.spawn with start_method="fork".
//
// The children run fn in a copy of the caller's memory (no exec), so spawn is for programs
// that call it before they create threads or groups. It is deliberately small; the
// launcher (tools/launch) is the full-featured way to start ranks of a program.
#include "api/spawn.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/errors.h"
#include "api/failure_report.h"
#include "api/job_identity.h"
#include "api/run_main.h"

namespace distcomm {
namespace {

using Clock = std::chrono::steady_clock;

struct Child {
  int rank = -1;
  pid_t pid = -1;
  int error_fd = -1;   // read end: what fn threw, written by the child before it exits
  std::string thrown;  // collected from error_fd
  bool running = true;
  int status = 0;
  int exit_fd = -1;  // a pidfd: readable once the child has exited (-1 where the kernel has none)
  int64_t ended_ns = 0;        // when its exit was seen
  bool stopped_by_us = false;  // still running when the job was stopped
};

// So that the parent sleeps until a child exits instead of polling for it.
int open_exit_fd(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

void close_exit_fd(Child& c) {
  if (c.exit_fd >= 0) ::close(c.exit_fd);
  c.exit_fd = -1;
}

// A port nobody listens on now; rank 0's store binds it a moment later.
int pick_free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  socklen_t len = sizeof(addr);
  bool ok = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
            ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  int err = errno;
  if (fd >= 0) ::close(fd);
  if (!ok) throw Error(std::string("spawn: cannot find a free port: ") + std::strerror(err));
  return ntohs(addr.sin_port);
}

// The child's whole life: environment, fn, and an exit that skips the parent's atexit
// handlers and static destructors (they belong to the parent's copy of the program).
[[noreturn]] void run_rank(int rank, int nprocs, int port, const JobIdentity& identity, pid_t parent,
                           const SpawnOptions& options, const std::function<void(int, int)>& fn, int error_fd) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // a dead parent must not leave ranks waiting forever
  if (::getppid() != parent) ::_exit(1);
  ::setenv("RANK", std::to_string(rank).c_str(), 1);
  ::setenv("WORLD_SIZE", std::to_string(nprocs).c_str(), 1);
  ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
  ::setenv("LOCAL_WORLD_SIZE", std::to_string(nprocs).c_str(), 1);
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  ::setenv(kRunIdVariable, identity.run_id.c_str(), 1);
  ::setenv(kStoreTokenVariable, identity.token.c_str(), 1);
  if (!options.backend.empty()) ::setenv("DISTCOMM_BACKEND", options.backend.c_str(), 1);
  std::string thrown;
  try {
    fn(rank, nprocs);
  } catch (...) {
    FailureReport report;
    report.unix_time_ns = FailureReport::now_ns();
    report.message = type_and_message(std::current_exception());
    thrown = report.encode();
  }
  std::fflush(nullptr);
  if (!thrown.empty()) {
    ssize_t ignored = ::write(error_fd, thrown.data(), std::min<size_t>(thrown.size(), 16384));
    (void)ignored;
    ::_exit(1);
  }
  ::_exit(0);
}

// Reads what a child wrote on its (non-blocking) error pipe so far; closes the pipe at end
// of stream, or when `last` (the child is gone, but something it forked may hold the pipe).
void collect_thrown(Child& c, bool last = false) {
  char buf[4096];
  ssize_t n;
  while ((n = ::read(c.error_fd, buf, sizeof(buf))) > 0) c.thrown.append(buf, static_cast<size_t>(n));
  if (n == 0 || last || (errno != EAGAIN && errno != EINTR)) {
    ::close(c.error_fd);
    c.error_fd = -1;
  }
}

// Waits up to `wait` for children to end, reading their error pipes meanwhile. Sleeps until
// a child exits or writes (its pidfd or pipe), or, without pidfds, looks every 5 ms.
void reap_for(std::vector<Child>& children, std::chrono::milliseconds wait) {
  Clock::time_point deadline = Clock::now() + wait;
  while (true) {
    bool any_running = false;
    bool every_exit_seen = true;
    std::vector<pollfd> fds;
    for (Child& c : children) {
      if (c.running && ::waitpid(c.pid, &c.status, WNOHANG) == c.pid) {
        c.running = false;
        c.ended_ns = FailureReport::now_ns();
      }
      if (!c.running) close_exit_fd(c);
      any_running |= c.running;
      if (c.running) {
        every_exit_seen &= c.exit_fd >= 0;
        if (c.exit_fd >= 0) fds.push_back(pollfd{c.exit_fd, POLLIN, 0});
      }
      if (c.error_fd >= 0) fds.push_back(pollfd{c.error_fd, POLLIN, 0});
    }
    const auto now = Clock::now();
    if (!any_running || now >= deadline) return;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
    ::poll(fds.data(), fds.size(), every_exit_seen ? static_cast<int>(left) : 5);
    for (const pollfd& p : fds) {
      for (Child& c : children) {
        if (c.error_fd == p.fd && (p.revents & (POLLIN | POLLHUP))) collect_thrown(c);
      }
    }
  }
}

void stop_all(std::vector<Child>& children, std::chrono::seconds grace) {
  for (Child& c : children) {
    if (c.running) {
      c.stopped_by_us = true;
      ::kill(c.pid, SIGTERM);
    }
  }
  reap_for(children, grace);
  for (Child& c : children) {
    if (c.running) ::kill(c.pid, SIGKILL);
  }
  for (Child& c : children) {
    if (c.running && ::waitpid(c.pid, &c.status, 0) == c.pid) c.running = false;
    if (c.error_fd >= 0) collect_thrown(c, /*last=*/true);
    close_exit_fd(c);
  }
}

bool failed(const Child& c) { return !c.running && !(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0); }

// When the child failed: the time it reported with what it threw, else when its exit was
// seen. Ranks that the stop itself ended did not fail on their own.
std::optional<int64_t> failure_time(const Child& c) {
  if (!failed(c)) return std::nullopt;
  if (auto report = FailureReport::decode(c.thrown)) return report->unix_time_ns;
  if (c.stopped_by_us) return std::nullopt;
  return c.ended_ns;
}

// The rank that failed first, by time: the cause of a cascade, where the others failed
// because it did (a closed connection, a timeout waiting for it).
const Child* first_failure(const std::vector<Child>& children) {
  const Child* first = nullptr;
  std::optional<int64_t> first_time;
  for (const Child& c : children) {
    const std::optional<int64_t> t = failure_time(c);
    if (t && (!first_time || *t < *first_time)) {
      first = &c;
      first_time = t;
    }
  }
  return first;
}

std::string how_it_failed(const Child& c) {
  if (auto report = FailureReport::decode(c.thrown)) return "it threw " + report->message;
  if (!c.thrown.empty()) return "it threw " + c.thrown;
  if (WIFSIGNALED(c.status)) {
    int sig = WTERMSIG(c.status);
    const char* abbrev = ::sigabbrev_np(sig);
    return std::string("killed by signal ") + (abbrev ? std::string("SIG") + abbrev : std::to_string(sig)) +
           " (" + ::strsignal(sig) + ")";
  }
  return "exit code " + std::to_string(WEXITSTATUS(c.status));
}

}  // namespace

void spawn(int nprocs, const std::function<void(int rank, int world_size)>& fn, const SpawnOptions& options) {
  if (nprocs < 1) throw InvalidArgument("spawn: nprocs must be at least 1, got " + std::to_string(nprocs));
  if (!fn) throw InvalidArgument("spawn: fn is empty");
  if (options.timeout.count() < 0 || options.grace.count() < 0) {
    throw InvalidArgument("spawn: timeout and grace must not be negative");
  }
  const int port = pick_free_port();
  // Each call is its own job: a stray rank of another spawn() cannot join it.
  const JobIdentity identity = new_job_identity();
  const pid_t parent = ::getpid();
  std::fflush(nullptr);  // or buffered output would be printed once by each child as well

  std::vector<Child> children;
  for (int rank = 0; rank < nprocs; ++rank) {
    int fds[2];
    pid_t pid = -1;
    if (::pipe2(fds, O_CLOEXEC) == 0) {
      ::fcntl(fds[0], F_SETFL, O_NONBLOCK);
      pid = ::fork();
      if (pid == 0) {
        ::close(fds[0]);
        run_rank(rank, nprocs, port, identity, parent, options, fn, fds[1]);
      }
      ::close(fds[1]);
    }
    if (pid < 0) {
      int err = errno;
      stop_all(children, options.grace);
      throw Error("spawn: cannot start rank " + std::to_string(rank) + ": " + std::strerror(err));
    }
    Child c;
    c.rank = rank;
    c.pid = pid;
    c.error_fd = fds[0];
    c.exit_fd = open_exit_fd(pid);
    children.push_back(c);
  }

  const Clock::time_point start = Clock::now();
  while (true) {
    // Woken early by any child's exit; the limit is for SpawnOptions::timeout.
    auto wait = std::chrono::milliseconds(1000);
    if (options.timeout.count() > 0) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(start + options.timeout - Clock::now());
      wait = std::clamp(left, std::chrono::milliseconds(1), wait);
    }
    reap_for(children, wait);
    const Child* seen_failing = nullptr;
    bool all_done = true;
    for (const Child& c : children) {
      if (failed(c) && seen_failing == nullptr) seen_failing = &c;
      all_done &= !c.running;
    }
    if (seen_failing != nullptr) {
      stop_all(children, options.grace);
      // Now that every rank has ended and said why, the one that failed first by time.
      const Child* cause = first_failure(children);
      if (cause == nullptr) cause = seen_failing;
      throw Error("spawn: rank " + std::to_string(cause->rank) + " of " + std::to_string(nprocs) +
                  " failed first: " + how_it_failed(*cause) + "; the other ranks were stopped");
    }
    if (all_done) break;
    if (options.timeout.count() > 0 && Clock::now() - start >= options.timeout) {
      stop_all(children, options.grace);
      throw Timeout("spawn: the ranks were still running after " + std::to_string(options.timeout.count()) +
                    "s (SpawnOptions::timeout); all were stopped");
    }
  }
  for (Child& c : children) {
    if (c.error_fd >= 0) collect_thrown(c, /*last=*/true);
  }
}

}  // namespace distcomm
