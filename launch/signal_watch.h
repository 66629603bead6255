// Turns the signals a launcher cares about into bytes on a pipe it can poll() beside the
// ranks' output (the self-pipe trick), for as long as the watch lives.
#pragma once

#include <signal.h>

#include <vector>

namespace distcomm {
namespace launch {

// While it exists: SIGINT, SIGTERM and SIGHUP (stop the job) and SIGCHLD (a rank ended)
// are caught and queued; SIGPIPE is ignored (a closed terminal must not kill the launcher
// halfway through stopping its ranks). The previous dispositions come back on destruction.
// One watch per process at a time.
class SignalWatch {
 public:
  SignalWatch();
  ~SignalWatch();
  SignalWatch(const SignalWatch&) = delete;
  SignalWatch& operator=(const SignalWatch&) = delete;

  // The end to poll for POLLIN.
  int fd() const { return read_fd_; }
  // The signals caught since the last call, oldest first.
  std::vector<int> take();

 private:
  int read_fd_ = -1;
  int write_fd_ = -1;
  struct sigaction previous_[5];
};

}  // namespace launch
}  // namespace distcomm
