// Attempt::say_stopped_from_outside and publish_outside_stop (attempt_state.h): a job
// stopped by a signal to its launcher (outside_stop.h), apart from attempt.cc and
// attempt_failures.cc to keep each file short.
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

void Attempt::say_stopped_from_outside() {
  std::vector<int> outside;
  std::vector<int> stopped;
  std::vector<std::string> failed_before;
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
      failed_before.push_back("rank " + std::to_string(processes_[i].rank) + " (" + how_ended(i) + ")");
    }
  }
  say(stopped_from_outside_text(result_.interrupted_by, outside, stopped, failed_before));
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
