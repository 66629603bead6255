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
  std::string command;  // its /proc/<pid>/stat's command, read by the handler (else after it);
                        // "" when unreadable, or when the process there is not the sender
  int code = 0;         // si_code: SI_USER for kill(), SI_KERNEL for a terminal's signals
  bool exited = false;  // the sender is gone: no process has its pid, or one that started
                        // after the signal came (the pid reused), so its command is unknown
};

// /proc/<pid>/stat's command (field 2, in parentheses: it may hold spaces and parentheses
// itself) and start time (field 22: clock ticks since boot); nullopt when `text` is not one.
struct ProcessStat {
  std::string command;
  unsigned long long start_ticks = 0;
};
std::optional<ProcessStat> parse_process_stat(const std::string& text);

// Whether the process that started at `start_ticks` can have sent a signal that arrived at
// `arrival_ticks` (both clock ticks since boot): not when it started later -- the sender
// exited and its pid is another's now. The same tick may be either (a `kill` run and sent
// within 10 ms): it is named then, since a pid comes back only after the others are spent.
bool could_have_sent(unsigned long long start_ticks, unsigned long long arrival_ticks);

// CLOCK_BOOTTIME nanoseconds as /proc/<pid>/stat's clock ticks (sysconf(_SC_CLK_TCK)).
unsigned long long boot_ticks(long long boot_ns);

// Who sent a signal that arrived at `arrival_ticks`, from `stat_at_arrival` (its
// /proc/<pid>/stat as the handler read it; "" when it could not) or else its /proc/<pid>/stat
// now: named when the process there could have sent it (could_have_sent), `exited` when a
// later one holds the pid or none does (kill(pid, 0): ESRCH); neither when it cannot be read
// (another user's process under hidepid).
SignalSender identify_sender(int pid, unsigned uid, int code, unsigned long long arrival_ticks,
                             const std::string& stat_at_arrival);

// Whether a signal came from a terminal (a Ctrl-C, Ctrl-\ or hang-up): the kernel sends
// those (si_code SI_KERNEL, no sender pid); kill() from anywhere, also from outside this PID
// namespace (pid 0 then too), is SI_USER.
bool from_terminal(const SignalSender& s);

// "pid 123 (slurmstepd, uid 0)", "pid 123 (exited, uid 0)" when the sender was gone before
// its command was read, "pid 123 (uid 0)" when it could not be read otherwise; "the kernel
// (a terminal's Ctrl-C or hangup)" for a terminal's signal; "a process outside this PID namespace (...)" for a kill()
// from there, which arrives with pid 0 too (a pod's deletion or eviction, docker stop).
std::string sender_text(const SignalSender& s);

// While it exists: the signals that stop the job, SIGCHLD (a rank ended) and SIGUSR1 (the
// user asks for the ranks' trace dumps: the job runs on; its default action would end the
// launcher, and with it the job) are caught and queued; SIGPIPE is ignored (a closed terminal
// must not kill the launcher halfway through stopping its ranks). The previous dispositions
// come back on destruction. One watch per process at a time.
//
// The handler counts each signal (a lock-free atomic per signal), keeps the first sender of
// each stopping signal in a slot of its own, and only then writes one byte to a pipe: the
// reader's wake-up and the signals' order. A byte that finds the pipe full is dropped, the
// count is not: a flood of SIGCHLD or SIGUSR1 cannot hide a SIGTERM.
//
// The handler runs on whichever thread a signal lands on. As the watch ends, the handler's
// copy of the pipe's descriptor (an atomic) becomes -1, and the pipe is closed only once no
// handler runs (each counts itself in an atomic from before it reads the descriptor to after
// it wrote): one that had read it already, on another thread, never writes into a closed
// pipe, nor into a descriptor opened after (a store's socket that took the number). One
// stuck midway for a second leaves the pipe open rather than close it under it.
class SignalWatch {
 public:
  static constexpr int kCount = 7;     // signals watched (or ignored)
  static constexpr int kSignals = 32;  // the standard signals: every watched one is one
  SignalWatch();
  ~SignalWatch();
  SignalWatch(const SignalWatch&) = delete;
  SignalWatch& operator=(const SignalWatch&) = delete;

  // The end to poll for POLLIN.
  int fd() const { return read_fd_; }
  // The signals caught since the last call, oldest first (those whose byte found the pipe
  // full last). A stopping signal comes as often as it was caught (a second one is a repeat:
  // impatience, or the same stop forwarded); SIGCHLD and SIGUSR1 at most once per call (a
  // burst is one ask: reap, dump).
  std::vector<int> take();
  // Who sent the first `sig` caught (a repeat, e.g. a wrapper forwarding the scheduler's
  // signal, does not replace it); nullopt before take() returned one.
  std::optional<SignalSender> sender_of(int sig) const;
  // " from pid 123 (slurmstepd, uid 0)" for the first `sig` taken, "" when unknown: said
  // after "got SIGTERM".
  std::string from_text(int sig) const;

 private:
  int read_fd_ = -1;
  int write_fd_ = -1;
  unsigned taken_[kSignals] = {};  // by signal: the handler's count as take() last gave it
  mutable std::map<int, SignalSender> senders_;  // by signal: the first's, once identified
  struct sigaction previous_[kCount];
};

}  // namespace launch
}  // namespace distcomm
