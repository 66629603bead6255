// Turns the signals a launcher cares about into bytes on a pipe it can poll() beside the
// ranks' output (the self-pipe trick), for as long as the watch lives.
#pragma once

#include <signal.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace distcomm {
namespace launch {

// SIGINT, SIGTERM, SIGHUP and SIGQUIT: the signals that stop the job (as torchrun's agent
// handles them), the ranks getting the same signal and the grace period.
bool stops_the_job(int sig);

// Who sent a signal, as the kernel tells the handler (siginfo_t's si_pid, si_uid): a
// scheduler's stop is told apart from a Ctrl-C or a user's kill by it.
struct SignalSender {
  int pid = 0;  // 0: the kernel itself (code SI_KERNEL: a terminal's Ctrl-C or hang-up), or a
                // process outside this PID namespace (code SI_USER: a container runtime)
  unsigned uid = 0;
  std::string command;  // /proc/<pid>/comm as the signal was taken; "" when unreadable (gone)
  int code = 0;         // si_code: SI_USER for kill(), SI_KERNEL for a terminal's signals
};

// Whether a signal came from a terminal (a Ctrl-C, Ctrl-\ or hang-up): the kernel sends
// those (si_code SI_KERNEL, no sender pid); kill() from anywhere, also from outside this PID
// namespace (pid 0 then too), is SI_USER.
bool from_terminal(const SignalSender& s);

// "pid 123 (slurmstepd, uid 0)", "pid 123 (uid 0)" when its command could not be read (it
// may be gone: its pid may even be another's by now); "the kernel (a terminal's Ctrl-C or
// hangup)" for a terminal's signal; "a process outside this PID namespace (...)" for a kill()
// from there, which arrives with pid 0 too (a pod's deletion or eviction, docker stop).
std::string sender_text(const SignalSender& s);

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
  // The signals caught since the last call, oldest first. Each one's sender is kept for
  // sender_of (its command read now, while it likely still runs).
  std::vector<int> take();
  // Who sent the first `sig` that take() returned (a repeat, e.g. a wrapper forwarding the
  // scheduler's signal, does not replace it); nullopt when none was taken.
  std::optional<SignalSender> sender_of(int sig) const;
  // " from pid 123 (slurmstepd, uid 0)" for the first `sig` taken, "" when unknown: said
  // after "got SIGTERM".
  std::string from_text(int sig) const;

 private:
  int read_fd_ = -1;
  int write_fd_ = -1;
  std::map<int, SignalSender> senders_;  // by signal: the first taken's
  struct sigaction previous_[kCount];
};

}  // namespace launch
}  // namespace distcomm
