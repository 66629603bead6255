// How an elastic round ended: what the launchers decide on (RoundEndCause, and the signal
// of a launcher that was interrupted), and what they say (RoundEnd::why, for people only).
// The decisions read the cause, never the words: "node 1 (10.0.0.2) left: interrupted
// (SIGINT)" may be reworded without changing what the other machines do.
//
// In the rendezvous store (round/<r>/end, first wins):
//   "<restart|membership>|<exit code>|<cause>|<why>"
// with <cause> one of rank_failed, interrupted:<signal number>, interrupted_at_terminal:<signal
// number>, job_stopped:<signal number>, job_stopped_at_terminal:<signal number>, launcher_ended, went_away,
// everyone_went_away, machines_wait, unknown. A value of three fields (a launcher from before
// the cause was written) reads as RoundEndCause::kUnknown with all of its why.
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace distcomm {
namespace launch {

enum class RoundEndCause {
  kUnknown,
  kRankFailed,           // a rank failed on one of the members
  kLauncherInterrupted,  // a member's launcher got a stopping signal (RoundEnd::signal) and left, saying so
  kLauncherEnded,        // a member's launcher ended without a word (its link closed: killed, crashed)
  kLauncherWentAway,     // a member's heartbeat stopped (its network or machine gone)
  kEveryoneWentAway,     // every member went away: a launcher waiting for the next round ended it
  kMachinesWait,         // room for machines that wait to join: a membership change, not a failure
  // The launcher serving the rendezvous store got a stopping signal (RoundEnd::signal): the
  // store ends with it, so the whole job stops (job_stop_end).
  kJobStopped,
};

struct RoundEnd {
  // A failure or a machine gone (counts against --max_restarts); else a membership change
  // (a machine joining, or one removed on purpose), which counts none.
  bool restart = false;
  int exit_code = 0;  // the failure's, to exit with when no restart is left (0 to 255; else malformed)
  std::string why;       // for people: never parsed
  RoundEndCause cause = RoundEndCause::kUnknown;
  int signal = 0;  // kLauncherInterrupted, kJobStopped: the signal that launcher got
  // kLauncherInterrupted, kJobStopped: the signal came from the kernel (si_code SI_KERNEL, sender pid 0),
  // as a terminal's Ctrl-C or Ctrl-\ does, to that machine alone. A signal sent with kill (scancel
  // --signal=INT, srun forwarding a Ctrl-C, a script) may reach every machine of the job.
  bool from_terminal = false;
};

// The end a launcher writes when a stopping signal made it leave; `from_terminal`: the
// signal came from its terminal (signal_watch.h's from_terminal). A restart, unless that
// machine was removed on purpose (after_round_end): a membership change then, which counts
// no restart.
RoundEnd interrupted_end(const std::string& why, int sig, bool from_terminal);

// The end the launcher serving the rendezvous store writes when a stopping signal makes it
// leave: it cannot leave the job alone, since the store ends with it (the others, forming
// the next round without it, lost the store and ended in exit 1). Not a restart; its exit
// code is 128 + sig, the stopped job's on every machine.
RoundEnd job_stop_end(const std::string& why, int sig, bool from_terminal);

std::string encode_round_end(const RoundEnd& end);
// nullopt when `text` is no round end (fewer than three fields, a first field other than
// "restart" or "membership", or an exit code that is not 0 to 255 in plain digits).
std::optional<RoundEnd> decode_round_end(const std::string& text);

// What a survivor does after a round ended, before it joins the next one.
struct AfterRoundEnd {
  // How long to wait for a stopping signal of its own first: a scheduler stopping the whole
  // job (Slurm's scancel or preemption, a pod's eviction) sends SIGTERM to every machine,
  // and another machine's may have come first; a new round would start ranks only to stop
  // them (outside_stop.h). Zero when nothing says the job is being stopped.
  std::chrono::milliseconds hold_for_own_stop{0};
  // Another machine's launcher was stopped on purpose from its terminal (a Ctrl-C or
  // Ctrl-\, which reach that machine alone): that machine was removed, and the next round
  // forms at once. Any other stopping signal (SIGTERM, a SIGHUP of closed ssh sessions, a
  // SIGINT sent with kill: scancel --signal=INT, srun) may be the whole job's: held.
  bool removed_on_purpose = false;
  // The launcher serving the rendezvous store was stopped (kJobStopped): the job ends on
  // every machine, no new round, exit end.exit_code; nothing to hold for.
  bool job_stopped = false;
};
AfterRoundEnd after_round_end(const RoundEnd& end);

}  // namespace launch
}  // namespace distcomm
