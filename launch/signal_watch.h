// Turns the signals a launcher cares about into bytes on a pipe it can poll() beside the
// ranks' output (the self-pipe trick), for as long as the watch lives.
#pragma once

#include <signal.h>

#include <vector>

namespace distcomm {
namespace launch {

// SIGINT, SIGTERM, SIGHUP and SIGQUIT: the signals that stop the job (as torchrun's agent
// handles them), the ranks getting the same signal and the grace period.
bool stops_the_job(int sig);

// While it exists: the signals that stop the job, SIGCHLD (a rank ended) and SIGUSR1 (the
// user asks for the ranks' trace dumps: the job runs on; its default action would end the
// launcher, and with it the job) are caught and queued; SIGPIPE is ignored (a closed terminal must not kill the launcher
// halfway through stopping its ranks). The previous dispositions come back on destruction.
// One watch per process at a time.
class SignalWatch {
 public:
  static constexpr int kCount = 7;  // signals watched (or ignored)
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
  struct sigaction previous_[kCount];
};

}  // namespace launch
}  // namespace distcomm
