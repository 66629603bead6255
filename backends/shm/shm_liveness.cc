#include "backends/shm/shm_liveness.h"

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434  // the same number on every architecture (Linux 5.3)
#endif

namespace distcomm {
namespace shm {

ProcessWatch::ProcessWatch(int pid) {
  // O_CLOEXEC is implied for pidfds; a child that inherits one only watches the same peer.
  if (pid <= 0) return;
  fd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  gone_ = fd_ < 0 && errno == ESRCH;
}

ProcessWatch::~ProcessWatch() {
  if (fd_ >= 0) ::close(fd_);
}

ProcessWatch::ProcessWatch(ProcessWatch&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), gone_(std::exchange(other.gone_, false)) {}

ProcessWatch& ProcessWatch::operator=(ProcessWatch&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    gone_ = std::exchange(other.gone_, false);
  }
  return *this;
}

bool ProcessWatch::ended() const { return ends_within(std::chrono::milliseconds(0)); }

bool ProcessWatch::ends_within(std::chrono::milliseconds timeout) const {
  if (fd_ < 0) return gone_;
  struct pollfd p {fd_, POLLIN, 0};
  int n;
  do {
    n = ::poll(&p, 1, static_cast<int>(timeout.count()));  // an EINTR restarts the wait: rare, and bounded anyway
  } while (n < 0 && errno == EINTR);
  return n > 0 && (p.revents & (POLLIN | POLLHUP)) != 0;
}

}  // namespace shm
}  // namespace distcomm
