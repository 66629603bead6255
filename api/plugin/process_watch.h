// Whether another process of this host still runs, asked of the kernel about that process
// itself -- what shm and gloo use to learn that a peer rank on this host has died.
//
// The signals a backend sees otherwise belong to files, not processes: shm's lock on a
// peer's memfd, gloo's TCP connection to a peer. Both outlive their owner for as long as a
// child it forked after the group was made (a data loader worker, multiprocessing with
// fork, system()) runs: the child inherits the descriptors. A pidfd (pidfd_open, Linux 5.3)
// refers to the process: it becomes readable when that process ends (before it is reaped,
// after its descriptors are closed), whatever its children hold, and a pid reused later is
// another process to it. So a rank SIGKILLed by a user or the OOM killer is seen to end
// even while its forked children live on.
//
// Open the watch while the peer is known to run (during the group's creation, from a pid
// the peer published itself): a pid read later may already name another process. Only
// for peers in this process's PID namespace (shared_memory_domain(), auto_backend.h).
// Where the kernel has no pidfd_open, watching() is false and the caller keeps its other
// signal.
//
// Header-only: backends include it from the core's headers without linking anything new.
#pragma once

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <utility>
#include <vector>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434  // the same number on every architecture (Linux 5.3)
#endif

namespace distcomm {

class ProcessWatch {
 public:
  ProcessWatch() = default;
  // pid as this process's PID namespace numbers it (the peer's getpid()).
  explicit ProcessWatch(int pid) : pid_(pid) {
    // O_CLOEXEC is implied for pidfds; a child that inherits one only watches the same peer.
    if (pid <= 0) return;
    fd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    gone_ = fd_ < 0 && errno == ESRCH;
  }
  ~ProcessWatch() {
    if (fd_ >= 0) ::close(fd_);
  }
  ProcessWatch(ProcessWatch&& other) noexcept
      : pid_(std::exchange(other.pid_, 0)), fd_(std::exchange(other.fd_, -1)), gone_(std::exchange(other.gone_, false)) {}
  ProcessWatch& operator=(ProcessWatch&& other) noexcept {
    if (this != &other) {
      if (fd_ >= 0) ::close(fd_);
      pid_ = std::exchange(other.pid_, 0);
      fd_ = std::exchange(other.fd_, -1);
      gone_ = std::exchange(other.gone_, false);
    }
    return *this;
  }
  ProcessWatch(const ProcessWatch&) = delete;
  ProcessWatch& operator=(const ProcessWatch&) = delete;

  int pid() const { return pid_; }
  // Whether ended() can tell: the kernel gave a pidfd, or said that no such process exists.
  bool watching() const { return fd_ >= 0 || gone_; }
  // The pidfd, to poll for POLLIN with other descriptors (-1 without one).
  int fd() const { return fd_; }
  // Whether the process has ended (it may not be reaped yet). False when not watching.
  bool ended() const { return ends_within(std::chrono::milliseconds(0)); }
  // Whether it ends within `timeout` (waits at most that long). For a peer whose descriptor
  // has just closed: they close early in its exit, before the kernel marks it ended.
  bool ends_within(std::chrono::milliseconds timeout) const {
    if (fd_ < 0) return gone_;
    struct pollfd p {fd_, POLLIN, 0};
    int n;
    do {
      n = ::poll(&p, 1, static_cast<int>(timeout.count()));  // an EINTR restarts the wait: rare, and bounded anyway
    } while (n < 0 && errno == EINTR);
    return n > 0 && (p.revents & (POLLIN | POLLHUP)) != 0;
  }

 private:
  int pid_ = 0;
  int fd_ = -1;
  bool gone_ = false;  // pidfd_open found no such process: it had ended (and been reaped)
};

// Which of `watches` (those that are watching()) have ended, in one poll() for all: a
// process watching many peers while idle (shm's progress thread) asks about each of them
// twice a second, and one system call per peer was ~18,000 a second on a host of 96 ranks.
// Returns the indices into `watches`, in order.
inline std::vector<size_t> ended_among(const std::vector<const ProcessWatch*>& watches) {
  std::vector<size_t> ended;
  std::vector<struct pollfd> fds;
  std::vector<size_t> index_of_fd;
  for (size_t i = 0; i < watches.size(); ++i) {
    const ProcessWatch& w = *watches[i];
    if (w.fd() >= 0) {
      fds.push_back({w.fd(), POLLIN, 0});
      index_of_fd.push_back(i);
    } else if (w.watching() && w.ended()) {
      ended.push_back(i);  // no pidfd: pidfd_open found the process gone
    }
  }
  if (fds.empty()) return ended;
  int n;
  do {
    n = ::poll(fds.data(), fds.size(), 0);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return ended;
  for (size_t k = 0; k < fds.size(); ++k) {
    if (fds[k].revents & (POLLIN | POLLHUP)) ended.push_back(index_of_fd[k]);
  }
  std::sort(ended.begin(), ended.end());
  return ended;
}

}  // namespace distcomm
