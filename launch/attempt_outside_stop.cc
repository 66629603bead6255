// Attempt's methods for a job stopped by a signal to its launcher (outside_stop.h; the
// class: attempt_state.h): the stop's beginning, the note left for the other machines, a
// graceful rank's exit that came before the launcher's own signal, and the stop's one line.
// Apart from attempt.cc and attempt_failures.cc to keep each file short.
#include <signal.h>
#include <sys/wait.h>

#include <optional>
#include <string>
#include <vector>

#include "api/process/failure_report.h"
#include "api/process/local_processes.h"
#include "launch/attempt_state.h"
#include "launch/outside_stop.h"

namespace distcomm {
namespace launch {
namespace internal {
namespace {

constexpr int64_t kOutsideStopHoldNs =
    std::chrono::duration_cast<std::chrono::nanoseconds>(kOutsideStopHold).count();

}  // namespace

void Attempt::begin_outside_stop(int sig) {
  result_.interrupted_by = sig;
  stop_signal_ = sig;
  outside_signal_ns_ = FailureReport::now_ns();
  publish_outside_stop(sig);
  if (watch_ != nullptr && watch_->on_stop) watch_->on_stop(result_);
  // Who sent it is said in the stop's last line (say_stopped_from_outside).
  begin_stop(local::StopCause::kCaller, "got " + local::signal_name(sig));
}

bool Attempt::outside_stop_after_failure(int sig) {
  // SIGTERM only, a scheduler's stop (Slurm, Kubernetes): a SIGINT is a person at a
  // terminal, and one while the ranks stop after a failure is impatience (it kills them
  // at once, and no restart follows: job.cc). Static jobs only: an elastic round's end was
  // already told of the failure (on_stop).
  if (sig != SIGTERM || watch_ != nullptr || result_.interrupted_by != 0 || result_.signal_while_stopping != 0 ||
      ranks_.stop_cause() != local::StopCause::kFailure) {
    return false;
  }
  const int first = ranks_.first_seen_failure();
  if (first < 0) return false;
  const size_t i = static_cast<size_t>(first);
  const local::Child& c = ranks_[i];
  const int64_t now = FailureReport::now_ns();
  // Only an exit as if stopped (128 + a stopping signal: a handler's graceful exit, by the
  // convention shells and torchrun follow) is taken for the stop's. Any other code may be a
  // real failure that someone stopped the job after (a user's kill, srun -K ending the job
  // because of it): timing cannot tell the two apart, and a failure must never be hidden
  // (the review of e258281: `exit 7`, then a SIGTERM 1 s later, read "not a failure").
  if (c.running || c.stopped || !exited_as_if_stopped(c) || now - c.ended_ns > kOutsideStopHoldNs) return false;
  // A rank that reported an error failed on its own, whatever signal came after.
  if (!processes_[i].error_file.empty() && FailureReport::read(processes_[i].error_file)) return false;
  const std::string how = how_ended(i);
  result_.interrupted_by = sig;
  outside_signal_ns_ = now;
  result_.failed_rank = -1;
  result_.failure.clear();
  result_.how.clear();
  say("got " + local::signal_name(sig) + signals_.from_text(sig) + " " +
      std::to_string((now - c.ended_ns) / 1'000'000) + " ms after rank " + std::to_string(processes_[i].rank) +
      " exited (" + how + "): the job is being stopped from outside, and that exit was its part of the stop (a "
      "handler of the signal, likely), not a failure; the stop goes on, with the same grace");
  return true;
}

void Attempt::say_stopped_from_outside() {
  std::vector<int> outside;
  std::vector<int> stopped;
  std::vector<std::string> failed_before;
  std::vector<std::string> ended_with_stop;
  for (size_t i = 0; i < processes_.size(); ++i) {
    const local::Child& c = ranks_[i];
    if (ended_by_outside_stop(c)) {
      outside.push_back(processes_[i].rank);
    } else if (c.stopped) {
      stopped.push_back(processes_[i].rank);
    } else if (ranks_.failed(i) && refused_.count(i) == 0) {
      // Before the launcher's signal: one that adopted another's failure (a peer the
      // scheduler's signal had ended first) did not fail on its own.
      std::optional<FailureReport> report;
      if (!processes_[i].error_file.empty()) report = FailureReport::read(processes_[i].error_file);
      if (report && (report->consequence || report->lost_rank >= 0)) continue;
      const std::string rank = "rank " + std::to_string(processes_[i].rank) + " (" + how_ended(i) + ")";
      // Exited 128 + a stopping signal, unreported, as the signal came: its handler caught
      // the same signal from outside (a graceful checkpoint-and-exit). Any other code stays
      // a failure (outside_stop_after_failure). Not on another machine's word
      // (stopped_elsewhere_): this launcher's own signal is the evidence.
      if (stopped_elsewhere_.empty() && !report && exited_as_if_stopped(c) && outside_signal_ns_ != 0 &&
          c.ended_ns >= outside_signal_ns_ - kOutsideStopHoldNs) {
        ended_with_stop.push_back(rank);
      } else {
        failed_before.push_back(rank);
      }
    }
  }
  if (!stopped_elsewhere_.empty()) {
    say(stopped_elsewhere_text(result_.interrupted_by, stopped_elsewhere_, outside, stopped, failed_before,
                               node0_lost_));
    return;
  }
  const std::optional<SignalSender> sender = signals_.sender_of(result_.interrupted_by);
  std::string line = stopped_from_outside_text(result_.interrupted_by, outside, stopped, failed_before,
                                               sender ? sender_text(*sender) : "", ended_with_stop);
  if (watch_ != nullptr && watch_->exit_status_said_after && watch_->exit_status_said_after()) {
    // One job, one line with its exit status: the launcher's last, after this one. The rest
    // (who sent the signal, which ranks it stopped) is said here alone.
    line = line.substr(0, line.rfind("; exit status "));
  }
  say(line);
}

void Attempt::publish_outside_stop(int sig) {
  if (!board_ || failure_published_) return;
  failure_published_ = true;
  const std::string from = outside_sender_text(sig);
  // The marks' words follow "ranks [2, 3] were stopped by their launcher after ...": the
  // ranks the scheduler's own signal ended first went with the same stop.
  const std::string why = "it got " + local::signal_name(sig) + " " + from;
  std::vector<std::pair<int, std::string>> marks;
  for (size_t i = 0; i < processes_.size(); ++i) {
    if (ranks_[i].running || ended_by_outside_stop(ranks_[i])) marks.emplace_back(processes_[i].rank, why);
  }
  FailureNote note;
  note.node_rank = options_.node_rank;
  note.unix_time_ns = FailureReport::now_ns();
  note.text = "node " + std::to_string(options_.node_rank) + "'s launcher got " + local::signal_name(sig) + " " +
              from + " and stopped its ranks: no rank there failed on its own";
  if (!board_->publish(note, marks)) {
    say("cannot leave in the job's store that this machine's launcher was stopped by " + local::signal_name(sig) +
        " (" + board_->unreachable_why() + "): the other machines' launchers may name one of its ranks as failed");
  }
}

}  // namespace internal
}  // namespace launch
}  // namespace distcomm
