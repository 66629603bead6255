// A job stopped from outside: a scheduler (Slurm's scancel or preemption, a Kubernetes pod's
// eviction) signals every process of the job at once -- the launcher and each rank -- with
// SIGTERM, then SIGKILL after its grace (Slurm's KillWait, a pod's
// terminationGracePeriodSeconds). A rank whose default action ends it at once may die, and be
// reaped, before the launcher has read its own SIGTERM; taken as the first failure, it would
// be named as the job's culprit ("rank 0 failed first (signal SIGTERM)") and the job look
// failed, not stopped. So a rank ended by a stopping signal the launcher did not send holds
// the failure for a moment (OutsideStopHold): if the launcher's own stopping signal comes
// meanwhile, the job was stopped from outside (one line says so: stopped_from_outside_text),
// else those ranks alone were (a `pkill -TERM` of the program), and the lines say that the
// signal came from outside the launcher. A rank whose own handler catches the signal and
// exits (a graceful checkpoint-and-exit: code 143, or another) is part of the stop too when
// the launcher's SIGTERM follows within the hold (attempt_outside_stop.cc); the last line
// names who sent the launcher's signal (SignalWatch::sender_of).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "api/process/local_processes.h"
#include "launch/signal_watch.h"

namespace distcomm {
namespace launch {

// How long a failure by an outside stopping signal waits for the launcher's own. A
// scheduler signals the processes of one machine within milliseconds of each other; a
// loaded machine may take the launcher longer to run. The cost, when only the ranks got it:
// the others are stopped this much later.
constexpr std::chrono::milliseconds kOutsideStopHold{1500};

// Whether c ended by SIGTERM, SIGINT, SIGHUP or SIGQUIT (stops_the_job) that did not come
// from the launcher: it was not stopped by it (Child::stopped).
bool ended_by_outside_stop(const local::Child& c);

// Whether c, not stopped by the launcher, exited with code 128 + a stopping signal (143
// for SIGTERM, 130 for SIGINT): the code of a rank whose own handler caught that signal
// and exited gracefully (a checkpoint first), as a shell's trap or Python's default does.
bool exited_as_if_stopped(const local::Child& c);

// " from outside the launcher (it sent none)" when ended_by_outside_stop(c), else "": said
// after how c ended.
std::string outside_stop_note(const local::Child& c);

// The wait of one attempt for the launcher's own signal after its first failure by an
// outside stopping signal.
class OutsideStopHold {
 public:
  using Clock = std::chrono::steady_clock;
  // Whether the failure of `c` (the first seen) is to wait: it ended by an outside stopping
  // signal, or exited as if stopped by one (exited_as_if_stopped), and kOutsideStopHold has
  // not passed since the first call that said so.
  bool holds(const local::Child& c, Clock::time_point now = Clock::now());
  // When the hold ends, while it runs (the launcher's poll wakes then).
  std::optional<Clock::time_point> until() const;
  // Under --on_failure=continue, where each exit is reported (and replaced) as it comes: of
  // the processes that just exited, those to report now. One that ended by an outside
  // stopping signal (`by_outside_stop`) waits, with any such later one, until the hold has
  // passed; then they come back, after the ones given. A stop that begins meanwhile (the
  // launcher's own signal) leaves them unreported: no failure, no replacement.
  template <typename ByOutsideStop>
  std::vector<size_t> pass(const std::vector<size_t>& exited, ByOutsideStop by_outside_stop,
                           Clock::time_point now = Clock::now()) {
    std::vector<size_t> now_reported;
    for (size_t i : exited) {
      if (!over_ && by_outside_stop(i)) {
        if (!until_) until_ = now + kOutsideStopHold;
        held_.push_back(i);
      } else {
        now_reported.push_back(i);
      }
    }
    if (until_ && !over_ && now >= *until_) over_ = true;
    if (over_) {
      now_reported.insert(now_reported.end(), held_.begin(), held_.end());
      held_.clear();
    }
    return now_reported;
  }

 private:
  std::optional<Clock::time_point> until_;
  bool over_ = false;
  std::vector<size_t> held_;  // pass(): the exits that wait
};

// Who likely sent `sig` to the launcher: "from outside (a scheduler's cancel, preemption or
// eviction, or a kill)"; for SIGINT "(a Ctrl-C, or a kill from outside)".
std::string outside_sender_text(int sig);

// The launcher's line when `sig` (SIGTERM, SIGINT, SIGHUP, SIGQUIT) stopped the job:
// "the job was stopped by SIGTERM sent to the launcher from outside (a scheduler's cancel,
// preemption or eviction, or a kill), not by a failure: no rank failed on its own; ranks 0, 1
// got SIGTERM from outside too; ranks 2, 3 were stopped by the launcher; exit status 143
// (128 + 15)". `outside`: the global ranks ended by an outside stopping signal; `stopped`:
// those the launcher stopped; `failed_before`: the ranks that had failed on their own before
// the signal, each with how ("rank 2 (exit code 1)"): then no "no rank failed on its own".
// `sender`: who sent it (sender_text: "pid 123 (slurmstepd, uid 0)"), said after "from
// outside (...)" as " by pid 123 (...)"; "" when unknown. `ended_with_stop`: the ranks that
// exited on their own with codes (no signal) as the signal came, within kOutsideStopHold
// before it ("rank 0 (exit code 143)"): a handler of theirs caught the same signal from
// outside; part of the stop, no failure.
std::string stopped_from_outside_text(int sig, const std::vector<int>& outside, const std::vector<int>& stopped,
                                      const std::vector<std::string>& failed_before, const std::string& sender = "",
                                      const std::vector<std::string>& ended_with_stop = {});

// Another machine's launcher's line when node 0's launcher, stopped by a signal while it
// waited for the other machines' ranks, told it to stop its ranks (job_failure_board.h,
// publish_job_stop): "the job was stopped on node 0: <why>; ranks 2, 3 were stopped by this
// machine's launcher; exit status 143 (128 + 15)". `why` is node 0's text; with
// `node0_lost`, this launcher's own ("node 0's launcher ended or was lost: ...", said
// without "the job was stopped on node 0: ", which node 0 never said).
std::string stopped_elsewhere_text(int sig, const std::string& why, const std::vector<int>& outside,
                                   const std::vector<int>& stopped, const std::vector<std::string>& failed_before,
                                   bool node0_lost = false);

}  // namespace launch
}  // namespace distcomm
