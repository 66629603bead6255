// Attempt's methods for a static job across machines stopped on node 0 while node 0's
// launcher waited for the other machines' ranks (its own had exited 0): it leaves the job's
// stop on the failure board (job_failure_board.h, publish_job_stop), the other machines'
// launchers read it as they beat (node_roll_call.h) and stop their ranks, each saying why.
// Without it node 0's launcher went away and the other machines' ranks ran on, their job's
// store gone. Node 0's last line names each other machine as read after the telling. A
// launcher whose beats no longer reach node 0's store stops its ranks as for that stop,
// unless node 0's farewell came first (node_roll_call.h, node0_left): then they run on.
// The class: attempt_state.h; apart from attempt.cc to keep each file short.
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
#include "launch/job_outcome.h"
#include "launch/node_roll_call.h"

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

// Another machine in node 0's last line after the job's stop was left for it, as read
// after the wait for it: whether its launcher read the stop, had ended, or fell silent.
std::string told_machine_text(const OtherMachine& m) {
  const std::string node = "node " + std::to_string(m.node_rank);
  if (m.stop_seen) return node + " read it (" + m.who + ")";
  switch (m.state) {
    case OtherMachine::State::kExitedZero:
      return node + " had ended: its ranks exited 0 (" + m.who + ")";
    case OtherMachine::State::kFailed:
      return node + " had ended: its ranks failed (" + m.who + ")";
    case OtherMachine::State::kLost:
      if (!m.checked_in) return node + "'s launcher never checked in";
      return node + " fell silent (" + m.who + ", last seen " + tenths_text(m.last_seen) + " into the job)";
    case OtherMachine::State::kRunning:
      break;
  }
  if (!m.checked_in) return node + "'s launcher had not checked in";
  return node + " had not read it: its ranks may run on (" + m.who + ")";
}

}  // namespace

void Attempt::handle_stop_elsewhere() {
  if (roll_call_ == nullptr || options_.node_rank == 0 || ranks_.stopping() || result_.interrupted_by != 0) return;
  // Its ranks all ended already (exited 0, draining their output): nothing here to stop,
  // and their success stands.
  if (ranks_.running() == 0) return;
  if (!said_node0_left_) {
    if (const std::optional<std::string> words = roll_call_->node0_left()) {
      // Its ranks had exited 0 and it stopped waiting for these: they may legitimately run
      // longer (an evaluation, a checkpoint's write), as torchrun lets such workers finish.
      said_node0_left_ = true;
      say("node 0's launcher has left the job (" + *words +
          "); this machine's ranks run on and this launcher reports how they end");
    }
  }
  const std::optional<std::pair<int, std::string>> stop = roll_call_->job_stop();
  if (!stop) return;
  result_.interrupted_by = stop->first;
  stop_signal_ = stop->first;  // passed on, as node 0's launcher would have to its own ranks
  stopped_elsewhere_ = stop->second;
  node0_lost_ = roll_call_->node0_lost();
  failure_published_ = true;  // nothing of this machine's to leave: node 0's stop is the job's
  // Taken for lost, node 0's launcher said nothing: this launcher's own words alone.
  begin_stop(local::StopCause::kCaller,
             node0_lost_ ? stop->second : "node 0's launcher stopped the job (" + stop->second + ")");
}

std::string Attempt::tell_others_of_stop(int sig, NodeRollCall* roll_call) {
  if (!board_ || roll_call == nullptr) return "";
  FailureNote note;
  note.node_rank = options_.node_rank;
  note.unix_time_ns = FailureReport::now_ns();
  note.text = "node 0's launcher got " + local::signal_name(sig) + signals_.from_text(sig) + " " +
              outside_sender_text(sig) + " while it waited for the other machines' ranks to end (its own had exited 0)";
  if (!board_->publish_job_stop(note, sig)) {
    say("cannot leave the job's stop in its store (" + board_->unreachable_why() +
        "): the other machines' ranks may run on; stop them there");
    return "";
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
  if (roll_call->stop_known_by_all()) return "told the other machines' launchers to stop their ranks";
  return "told the other machines' launchers to stop their ranks, but not all had read it " +
         (again != 0 ? "when " + local::signal_name(again) + " came" : "within " + seconds_text(kJobStopReach));
}

void Attempt::end_wait_on_stop(int sig, NodeRollCall* roll_call) {
  const std::string exit_status =
      "; exit status " + std::to_string(result_.exit_code) + " (128 + " + std::to_string(sig) + ")";
  const std::string cause = "got " + local::signal_name(sig) + signals_.from_text(sig) +
                            " while waiting for the other machines' launchers to say how their ranks ended: this "
                            "machine's " +
                            rank_span_text(options_.global_rank(0), options_.nproc_per_node) + " had exited 0";
  // The cause first, at once: the telling that it explains takes up to kJobStopReach.
  const bool telling = board_ != nullptr && roll_call != nullptr;
  if (telling) say(cause + "; telling the other machines' launchers to stop their ranks");
  const std::string told = tell_others_of_stop(sig, roll_call);
  // Read after the telling: a machine that read the stop meanwhile is named as such (read
  // before, it was named as not checked in, or as running, though it had just read it).
  const std::vector<OtherMachine> others = roll_call != nullptr ? roll_call->others() : std::vector<OtherMachine>();
  std::string each;
  for (const OtherMachine& m : others) {
    if (m.state != OtherMachine::State::kExitedZero) result_.others_not_clean.push_back(other_machine_text(m));
    if (!told.empty()) each += (each.empty() ? ": " : "; ") + told_machine_text(m);
  }
  if (told.empty()) {
    // Nothing was told: the others' ends, as without a stop's telling.
    std::string not_clean;
    for (const std::string& other : result_.others_not_clean) not_clean += "; " + other;
    say((telling ? std::string("the other machines' launchers were not told") : cause) + not_clean + exit_status);
    return;
  }
  say(told + each + exit_status);
}

}  // namespace internal
}  // namespace launch
}  // namespace distcomm
