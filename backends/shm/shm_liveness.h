// Whether a peer's process still runs, asked of the kernel about that process itself.
//
// A peer's segment lock (shm_segment.h) goes away only when the last descriptor of the
// peer's memfd closes, and a child the peer forked after the group was made (a data loader
// worker, multiprocessing with fork, system()) inherits that descriptor: the lock outlives
// its owner for as long as the child runs. A pidfd (pidfd_open, Linux 5.3) refers to the
// process, not to a file: it becomes readable when that process ends (before it is reaped),
// whatever its children hold, and a pid reused later is another process to it. So a rank
// whose owner was SIGKILLed, by a user or the OOM killer, is named within a liveness check
// even while its forked children live on.
//
// Taken at group creation while the peer is known to run (its segment is opened right
// after, and the nonce check proves that the pid was its owner's). Where the kernel has no
// pidfd_open, the watch says so and the caller falls back to the segment lock.
#pragma once

#include <chrono>

namespace distcomm {
namespace shm {

class ProcessWatch {
 public:
  ProcessWatch() = default;
  // pid as this process's PID namespace numbers it (the peer's getpid(); shm's ranks share
  // one namespace).
  explicit ProcessWatch(int pid);
  ~ProcessWatch();
  ProcessWatch(ProcessWatch&& other) noexcept;
  ProcessWatch& operator=(ProcessWatch&& other) noexcept;
  ProcessWatch(const ProcessWatch&) = delete;
  ProcessWatch& operator=(const ProcessWatch&) = delete;

  // Whether ended() can tell: the kernel gave a pidfd, or said that no such process exists.
  bool watching() const { return fd_ >= 0 || gone_; }
  // Whether the process has ended (it may not be reaped yet). False when not watching.
  bool ended() const;
  // Whether it ends within `timeout` (waits at most that long). For a peer whose memfd
  // has just gone from /proc: its descriptors close early in its exit, before the kernel
  // marks it ended.
  bool ends_within(std::chrono::milliseconds timeout) const;

 private:
  int fd_ = -1;
  bool gone_ = false;  // pidfd_open found no such process: it had ended (and been reaped)
};

}  // namespace shm
}  // namespace distcomm
