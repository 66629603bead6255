// The processes of a job on this machine: what spawn() (api), the launcher (launch/), the
// benchmarks (tools/bench) and the test harness (tests/testing) share -- a free port for
// rank 0's store, children watched together and stopped together, and how an exit status
// reads. The ranks of a job are started and watched through local_ranks.h, which keeps one
// policy over a ChildSet.
//
// Header-only, so that the launcher, which does not link the core, uses the same code.
#pragma once

#include <cxxabi.h>
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
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <typeinfo>
#include <vector>

#include "api/process/failure_report.h"
#include "api/process/oom_kills.h"
#include "api/process/write_fully.h"

namespace distcomm {
namespace local {

// A TCP port nobody listens on now: bound to port 0 on every interface, read, closed. Rank
// 0's store binds it a moment later (the small race every launcher that hands out a port
// accepts). Throws std::runtime_error.
inline int pick_free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof(addr);
  const bool ok = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  const int err = errno;
  if (fd >= 0) ::close(fd);
  if (!ok) throw std::runtime_error(std::string("cannot find a free TCP port: ") + std::strerror(err));
  return ntohs(addr.sin_port);
}

// "SIGSEGV", "SIGRTMIN+3".
inline std::string signal_name(int sig) {
  if (const char* abbrev = ::sigabbrev_np(sig)) return std::string("SIG") + abbrev;
  if (sig >= SIGRTMIN && sig <= SIGRTMAX) return "SIGRTMIN+" + std::to_string(sig - SIGRTMIN);
  return "SIG" + std::to_string(sig);
}

// "exit code 3", "signal SIGSEGV (Segmentation fault)" for a waitpid status.
inline std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return "signal " + signal_name(sig) + " (" + ::strsignal(sig) + ")" + (WCOREDUMP(status) ? ", core dumped" : "");
  }
  return "wait status " + std::to_string(status);
}

inline bool exited_cleanly(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

// The shell's convention: the exit code, or 128 + the signal number.
inline int shell_exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// In a catch block: "distcomm::Timeout: what" -- the exception's type, demangled, and its
// message ("<type> (not a std::exception)" for others).
inline std::string describe_current_exception() {
  const std::type_info* type = abi::__cxa_current_exception_type();
  std::string name = "unknown";
  if (type) {
    int status = 0;
    std::unique_ptr<char, void (*)(void*)> demangled(abi::__cxa_demangle(type->name(), nullptr, nullptr, &status),
                                                      std::free);
    name = status == 0 && demangled ? demangled.get() : type->name();
  }
  try {
    throw;
  } catch (const std::exception& e) {
    return name + ": " + e.what();
  } catch (...) {
    return name + " (not a std::exception)";
  }
}

// The FailureReport of the exception being handled, now. consequence: whether it is another
// rank's failure, adopted; lost_rank: the rank whose loss it is (FailureReport's fields; the
// core knows them, this header does not).
inline std::string report_of_current_exception(bool consequence, int lost_rank = -1) {
  FailureReport thrown;
  thrown.unix_time_ns = FailureReport::now_ns();
  thrown.message = describe_current_exception();
  thrown.consequence = consequence;
  thrown.lost_rank = lost_rank;
  return thrown.encode();
}

// One child process and what it reported.
struct Child {
  pid_t pid = -1;
  bool own_group = false;  // it leads a process group of its own: signals go to all of it
  int report_fd = -1;      // read end of a pipe the child reports through, or -1
  std::string report;      // what came through it so far
  int exit_fd = -1;        // a pidfd, readable once the child has exited (-1 without one)
  bool running = true;
  int status = 0;          // the waitpid status, once !running
  int64_t ended_ns = 0;    // when its exit was seen (FailureReport::now_ns)
  bool stopped = false;    // still running when the set was told to stop
  int rank = -1;           // the job's rank it runs (FailureReport::lost_rank); -1: its index
  // Its memory cgroup's OOM kills when it started (oom_kills.h), whether the set sent it
  // SIGKILL, and, once it died of a SIGKILL the set did not send while the count rose, the
  // likely sender ("likely the OOM killer: ...").
  std::optional<OomCount> oom_at_start;
  bool sigkill_sent = false;
  std::string death_hint;
};

// How c ended: describe_wait_status's words, and what likely sent a SIGKILL nobody here sent
// (the OOM killer, which tells no one).
inline std::string describe_end(const Child& c) {
  return describe_wait_status(c.status) + (c.death_hint.empty() ? "" : " (" + c.death_hint + ")");
}

// A child of this process, watched from now on (its pidfd opened: a ChildSet then sleeps
// until it exits instead of looking every few milliseconds).
inline Child watched_child(pid_t pid, int report_fd = -1, bool own_group = false) {
  Child c;
  c.pid = pid;
  c.report_fd = report_fd;
  c.own_group = own_group;
  c.exit_fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  c.oom_at_start = oom_count_of(pid);
  return c;
}

// Forks a child that runs body and exits: 0 when body returns "", else 1 after writing to
// its report pipe what it returned, or a FailureReport (time, type and message) of the
// exception that escaped it. The child dies with this process (PR_SET_PDEATHSIG), and
// leaves by _exit: the parent's atexit handlers and static destructors belong to the
// parent. Throws std::runtime_error.
inline Child fork_child(const std::function<std::string()>& body) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  const pid_t parent = ::getpid();
  std::fflush(nullptr);  // or the parent's buffered output would be written by the child as well
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    throw std::runtime_error(std::string("fork: ") + std::strerror(err));
  }
  if (pid == 0) {
    ::close(fds[0]);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // a dead parent must not leave children running
    if (::getppid() != parent) ::_exit(1);
    std::string report;
    try {
      report = body();
    } catch (...) {
      report = report_of_current_exception(/*consequence=*/false);
    }
    std::fflush(nullptr);
    write_fully(fds[1], report);
    ::_exit(report.empty() ? 0 : 1);
  }
  ::close(fds[1]);
  ::fcntl(fds[0], F_SETFL, O_NONBLOCK);
  return watched_child(pid, fds[0]);
}

// Children watched together: their reports read, their exits reaped, and all of them
// stopped at once. Children still running when the set is destroyed are left alone.
class ChildSet {
 public:
  ChildSet() = default;
  ChildSet(const ChildSet&) = delete;
  ChildSet& operator=(const ChildSet&) = delete;
  ~ChildSet() {
    for (Child& c : children_) close_fds(c);
  }

  size_t add(Child c) {
    children_.push_back(std::move(c));
    return children_.size() - 1;
  }
  size_t size() const { return children_.size(); }
  Child& operator[](size_t i) { return children_[i]; }
  const Child& operator[](size_t i) const { return children_[i]; }
  int running() const {
    int n = 0;
    for (const Child& c : children_) n += c.running ? 1 : 0;
    return n;
  }

  // Reads what the children reported and reaps those that exited, first sleeping up to
  // `wait` until one of them exits or writes (or `extra` has something to read). Returns
  // the indices of the children that exited in this call.
  std::vector<size_t> poll(std::chrono::milliseconds wait, std::vector<pollfd>* extra = nullptr) {
    std::vector<pollfd> fds = extra ? *extra : std::vector<pollfd>();
    bool every_exit_seen = true;  // else look again after a few milliseconds
    for (const Child& c : children_) {
      if (c.report_fd >= 0) fds.push_back(pollfd{c.report_fd, POLLIN, 0});
      if (!c.running) continue;
      every_exit_seen &= c.exit_fd >= 0;
      if (c.exit_fd >= 0) fds.push_back(pollfd{c.exit_fd, POLLIN, 0});
    }
    if (!every_exit_seen) wait = std::min(wait, std::chrono::milliseconds(5));
    ::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(0, wait.count())));
    if (extra) std::copy(fds.begin(), fds.begin() + static_cast<std::ptrdiff_t>(extra->size()), extra->begin());
    std::vector<size_t> exited;
    exited.swap(reaped_early_);
    for (size_t i = 0; i < children_.size(); ++i) {
      read_report(children_[i]);
      if (reap(children_[i])) exited.push_back(i);
    }
    return exited;
  }

  // Sends sig to every running child, and to the group of every child that leads one
  // (also after it exited: what it started may still run there).
  void signal(int sig) {
    for (Child& c : children_) {
      c.sigkill_sent = c.sigkill_sent || (sig == SIGKILL && (c.own_group || c.running));
      if (c.own_group) {
        ::kill(-c.pid, sig);
      } else if (c.running) {
        ::kill(c.pid, sig);
      }
    }
    // A stopped process (SIGSTOP, a hung rank someone paused) acts on its signals only once
    // continued: without SIGCONT a stop waited the whole grace period for SIGKILL. Sent
    // after the signal, so that it is pending when the process runs again (as scancel).
    if (sig != SIGKILL && sig != SIGCONT && sig != SIGSTOP && sig != SIGTSTP && sig != SIGTTIN && sig != SIGTTOU) {
      for (const Child& c : children_) {
        if (c.own_group) {
          ::kill(-c.pid, SIGCONT);
        } else if (c.running) {
          ::kill(c.pid, SIGCONT);
        }
      }
    }
  }

  // Marks the children still running as stopped: when they end, it is not a failure of
  // their own (LocalRanks::first_failure passes over them unless they say otherwise). A
  // child that has already exited, unreaped, is reaped instead, not marked (two ranks that
  // die together: the second is a failure of its own too); the next poll() returns it.
  void mark_stopped() {
    for (size_t i = 0; i < children_.size(); ++i) {
      if (reap(children_[i])) reaped_early_.push_back(i);
    }
    for (Child& c : children_) c.stopped = c.stopped || c.running;
  }

  // mark_stopped, SIGTERM, up to `grace` for the children to end (reading their reports),
  // then SIGKILL for the rest; every child is reaped when it returns.
  void stop(std::chrono::milliseconds grace) {
    mark_stopped();
    signal(SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + grace;
    while (running() > 0 && std::chrono::steady_clock::now() < deadline) {
      poll(std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()));
    }
    kill_all();
  }

  // SIGKILL for the children still running; every child is reaped when it returns.
  void kill_all() {
    mark_stopped();
    signal(SIGKILL);
    for (Child& c : children_) {
      if (c.running && ::waitpid(c.pid, &c.status, 0) == c.pid) {
        c.running = false;
        c.ended_ns = FailureReport::now_ns();
        note_likely_killer(c);
      }
      read_report(c);
      close_fds(c);
    }
  }

 private:
  // Reaps c if it is running and has exited; true when it did.
  static bool reap(Child& c) {
    if (!c.running || ::waitpid(c.pid, &c.status, WNOHANG) != c.pid) return false;
    c.running = false;
    c.ended_ns = FailureReport::now_ns();
    note_likely_killer(c);
    read_report(c);  // what it wrote last; a process it left behind may hold the pipe open
    close_fds(c);
    return true;
  }
  // A SIGKILL that this set did not send: the OOM killer's, when the child's memory cgroup
  // counted an OOM kill since it started.
  static void note_likely_killer(Child& c) {
    if (WIFSIGNALED(c.status) && WTERMSIG(c.status) == SIGKILL && !c.sigkill_sent && c.oom_at_start) {
      c.death_hint = oom_kill_hint(*c.oom_at_start);
    }
  }
  static void read_report(Child& c) {
    if (c.report_fd < 0) return;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(c.report_fd, buf, sizeof(buf))) > 0) c.report.append(buf, static_cast<size_t>(n));
    if (n == 0) {  // end of stream
      ::close(c.report_fd);
      c.report_fd = -1;
    }
  }
  static void close_fds(Child& c) {
    for (int* fd : {&c.report_fd, &c.exit_fd}) {
      if (*fd >= 0) ::close(*fd);
      *fd = -1;
    }
  }

  std::vector<Child> children_;
  std::vector<size_t> reaped_early_;  // by mark_stopped: the next poll() returns them
};

}  // namespace local
}  // namespace distcomm
