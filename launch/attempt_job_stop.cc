// Attempt's methods for a static job across machines stopped on node 0 while node 0's
// launcher waited for the other machines' ranks (its own had exited 0): it leaves the job's
// stop on the failure board (job_failure_board.h, publish_job_stop), the other machines'
// launchers read it as they beat (node_roll_call.h) and stop their ranks, each saying why.
// Without it node 0's launcher went away and the other machines' ranks ran on, their job's
// store gone. The class: attempt_state.h; apart from attempt.cc to keep each file short.
#include <poll.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/process/failure_report.h"
#include "api/process/local_processes.h"
#include "launch/attempt_state.h"
#include "launch/duration_text.h"

namespace distcomm {
namespace launch {
namespace internal {
namespace {

// How long node 0's launcher keeps its store for the other launchers to read the job's
// stop: they read it at their next beat (each kRollCallBeat), and node 0's roll call sees
// that they did at its next look (as often): two beats, and room for a loaded machine.
constexpr std::chrono::milliseconds kJobStopReach{5000};
constexpr std::chrono::milliseconds kJobStopLook{100};
// A stopping signal this soon after the one being told is a repeat of it, not a second ask.
constexpr std::chrono::milliseconds kRepeatedStop{1000};

}  // namespace

void Attempt::handle_stop_elsewhere() {
  if (roll_call_ == nullptr || options_.node_rank == 0 || ranks_.stopping() || result_.interrupted_by != 0) return;
  // Its ranks all ended already (exited 0, draining their output): nothing here to stop,
  // and their success stands.
  if (ranks_.running() == 0) return;
  const std::optional<std::pair<int, std::string>> stop = roll_call_->job_stop();
  if (!stop) return;
  result_.interrupted_by = stop->first;
  stop_signal_ = stop->first;  // passed on, as node 0's launcher would have to its own ranks
  stopped_elsewhere_ = stop->second;
  failure_published_ = true;  // nothing of this machine's to leave: node 0's stop is the job's
  begin_stop(local::StopCause::kCaller, "node 0's launcher stopped the job (" + stop->second + ")");
}

void Attempt::tell_others_of_stop(int sig, NodeRollCall* roll_call) {
  if (!board_ || roll_call == nullptr) return;
  FailureNote note;
  note.node_rank = options_.node_rank;
  note.unix_time_ns = FailureReport::now_ns();
  note.text = "node 0's launcher got " + local::signal_name(sig) + signals_.from_text(sig) + " " +
              outside_sender_text(sig) + " while it waited for the other machines' ranks to end (its own had exited 0)";
  if (!board_->publish_job_stop(note, sig)) {
    say("cannot leave the job's stop in its store (" + board_->unreachable_why() +
        "): the other machines' ranks may run on; stop them there");
    return;
  }
  const Clock::time_point began = Clock::now();
  const Clock::time_point until = began + kJobStopReach;
  int again = 0;  // a second stopping signal, a deliberate one: no more waiting
  while (again == 0 && !roll_call->stop_known_by_all() && Clock::now() < until) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now());
    pollfd p{signals_.fd(), POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(std::min(left, kJobStopLook).count()));
    for (int s : signals_.take()) {
      // A repeat within a second is the same stop delivered twice (a signal to the process
      // group and a wrapper forwarding it, tini, a double Ctrl-C): ending the wait on it left
      // the other machines' ranks running (the review of e258281).
      if (stops_the_job(s) && Clock::now() - began >= kRepeatedStop) again = s;
    }
  }
  if (roll_call->stop_known_by_all()) {
    say("told the other machines' launchers to stop their ranks: each has read it, had ended, or fell silent");
  } else {
    say("told the other machines' launchers to stop their ranks, but not all had read it " +
        (again != 0 ? "when " + local::signal_name(again) + " came" : "within " + seconds_text(kJobStopReach)) +
        ": their ranks may run on");
  }
}

}  // namespace internal
}  // namespace launch
}  // namespace distcomm
