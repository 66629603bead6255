// The failure-reporting half of an attempt's methods (the class: attempt_state.h): how a
// rank ended, the line that says it failed, the job's failure (the first seen, then the
// first by the ranks' reports once all have ended), and under --on_failure=continue the
// failures that leave the others running and the job's verdict by each rank's last process.
// Apart from attempt.cc, which starts, watches and stops the ranks, to keep each file short.
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/process/failure_report.h"
#include "api/process/local_processes.h"
#include "api/process/local_ranks.h"
#include "launch/attempt_state.h"
#include "launch/duration_text.h"
#include "launch/replacement_notice.h"

namespace distcomm {
namespace launch {
namespace internal {
namespace {

// A rank ended by a signal the launcher did not send (SIGKILL from outside, SIGSEGV) wrote
// no report: it died before the launcher saw it, by as long as the launcher took to run
// again. The ranks that noticed its death report times within that lag, and comparing
// those with the time its exit was seen would name one of them as the cause. Its death
// counts as this much earlier than seen.
constexpr int64_t kUnseenDeathLagNs = 1'000'000'000;

// "rank 3", or "ranks 0-94, 96" (`ranks` ascending): a long list in ranges.
std::string ranks_text(const std::vector<int>& ranks) {
  std::string text;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    text += std::string(text.empty() ? "" : ", ") + std::to_string(ranks[i]);
    if (j > i) text += (j == i + 1 ? ", " : "-") + std::to_string(ranks[j]);
    i = j + 1;
  }
  return (ranks.size() == 1 ? "rank " : "ranks ") + text;
}

}  // namespace

std::string Attempt::how_ended(size_t i) const {
  const int status = ranks_[i].status;
  const auto fenced = fenced_.find(i);
  if (fenced != fenced_.end() && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
    return "taken for gone by its group (" + fenced->second + ") and killed by the launcher (SIGKILL)";
  }
  return local::describe_end(ranks_[i]) + outside_stop_note(ranks_[i]);
}

std::string Attempt::failed_line(size_t i) const {
  const RankProcess& p = processes_[i];
  return "rank " + std::to_string(p.rank) + " (local rank " + std::to_string(p.local_rank) + ", pid " +
         std::to_string(p.pid) + ") failed: " + how_ended(i);
}

void Attempt::note_failure(size_t i) {
  result_.failed_rank = processes_[i].rank;
  result_.failure = failed_line(i);
  result_.exit_code = local::shell_exit_code(ranks_[i].status);
  result_.how = how_ended(i);
}

void Attempt::report_failures_and_continue(const std::vector<size_t>& exited_now) {
  if (ranks_.stopping()) return;
  // A rank ended by a stopping signal from outside is reported (and replaced) only if the
  // launcher's own does not follow: a scheduler stopping the whole job (outside_stop.h).
  const std::vector<size_t> exited =
      outside_hold_.pass(exited_now, [&](size_t i) { return ended_by_outside_stop(ranks_[i]); });
  std::vector<size_t> failed;  // this turn's failed exits: one question to the store for all
  for (size_t i : exited) {
    if (ranks_.failed(i)) failed.push_back(i);
  }
  ask_refusals(failed, /*must_ask=*/false);
  for (size_t i : exited) {
    // A refused joiner's exit is said with its refusal (note_refusal): no failure, no
    // replacement. Asked of the job's store now, before the exit counts (ask_refusal).
    if (!ranks_.failed(i) || ask_refusal(i)) {
      announce_no_successor(store_, options_, processes_[i].member_id,
                            refused_.count(i) != 0 ? "refused by the members" : "it exited 0");
      continue;
    }
    // The first one seen is the job's failure until the ranks' reports name an earlier one
    // (name_first_failure); each is said in one line.
    if (result_.failed_rank < 0) {
      note_failure(i);
      publish_failure(i, /*stopping=*/false);  // the others run on: no rank is stopped for it
    }
    const std::string log = router_.log_path(processes_[i].rank);
    const int others = ranks_.running();
    std::string replacement;
    if (options_.replace_after.count() >= 0) {
      const int local = processes_[i].local_rank;
      int& replaced = replaced_[static_cast<size_t>(local)];
      if (!job_stopped_.empty()) {
        // Asked with its exit (ask_refusals): a joiner would end "the job it waited to join
        // stopped", and be replaced again until --max_replacements is spent.
        replacement = "; not replaced: the job's members stopped it";
      } else if (nobody_to_join()) {
        // A replacement joins running ranks: start_due_replacements would start none. With
        // several machines, the other machines' ranks may run on and take it in when all of
        // this one's died (a joiner with nothing left to join ends with its own error).
        replacement = "; not replaced: no rank of this machine runs on for a replacement to join";
      } else if (replaced >= options_.max_replacements) {
        replacement = std::string(options_.max_replacements == 0 ? "; not replaced: " : "; not replaced again: ") +
                      replacements_used_up(processes_[i].rank, replaced, options_.max_replacements);
      } else {
        replacements_.push_back({Clock::now() + options_.replace_after, local, ++replaced});
        replacement = "; its replacement starts in " + seconds_text(options_.replace_after);
        // The survivors of a fault-tolerant job, if now fewer than their minimum, wait for it.
        announce_successor(store_, options_, processes_[i].member_id, member_id_of(processes_[i].rank, replaced),
                           replacements_.back().due);
      }
      if (replacement.rfind("; not replaced", 0) == 0) {
        announce_no_successor(store_, options_, processes_[i].member_id, replacement.substr(2));
      }
    }
    say(failed_line(i) + (log.empty() ? "" : " (its output is in " + log + ")") + "; " + std::to_string(others) +
        (others == 1 ? " rank runs" : " ranks run") + " on (--on_failure=continue)" + replacement);
  }
}

void Attempt::report_first_failure() {
  const int first = ranks_.first_seen_failure();
  if (first < 0 || ranks_.stopping()) return;
  // Ended by a stopping signal from outside: the launcher's own may be on its way (a
  // scheduler stopping the whole job); the failure waits for it a moment (outside_stop.h).
  if (outside_hold_.holds(ranks_[static_cast<size_t>(first)])) return;
  note_failure(static_cast<size_t>(first));
  // Before the stop's signal: a peer on another machine that sees this machine's ranks go
  // finds them marked as stopped by their launcher, and the failure that caused it.
  publish_failure(static_cast<size_t>(first), /*stopping=*/true);
  say(result_.failure);
  if (watch_ != nullptr && watch_->on_stop) {
    // The round may have ended already (a machine went away, and this rank failed for want
    // of it): then that is the cause, and this failure one of its consequences.
    const std::string ended = watch_->on_stop(result_);
    if (!ended.empty()) result_.stopped_for = ended;
  }
  const RankProcess& p = processes_[static_cast<size_t>(first)];
  std::string log = router_.log_path(p.rank);
  if (!log.empty()) say("its output is in " + log);
  begin_stop(local::StopCause::kFailure, "rank " + std::to_string(p.rank) + " failed");
}

void Attempt::open_failure_board() {
  // One machine's launcher sees every rank: the board would tell it nothing. Without the
  // job's store served by a launcher (--serve_store=false, the self-launching examples),
  // there is no store the launchers share.
  if (options_.nnodes <= 1 || !options_.serve_store || !job_failure_board_opener()) return;
  board_ = job_failure_board_opener()(JobStoreAddress{options_.master_addr, result_.master_port, options_.identity});
}

FailureNote Attempt::note_of(size_t i, const std::optional<FailureReport>& report, const std::string& text) const {
  FailureNote note;
  note.node_rank = options_.node_rank;
  note.rank = processes_[i].rank;
  note.text = text.substr(0, text.find('\n'));
  const local::Child& c = ranks_[i];
  if (report) {
    note.unix_time_ns = report->unix_time_ns;
    note.consequence = report->consequence || report->lost_rank >= 0;
  } else {
    // As name_first_failure dates a death nobody saw: before its exit was seen.
    note.unix_time_ns = c.ended_ns - (!c.stopped && WIFSIGNALED(c.status) ? kUnseenDeathLagNs : 0);
  }
  return note;
}

void Attempt::publish_failure(size_t i, bool stopping) {
  if (!board_ || failure_published_) return;
  failure_published_ = true;
  std::optional<FailureReport> report;
  if (!processes_[i].error_file.empty()) report = FailureReport::read(processes_[i].error_file);
  std::string text = failed_line(i);
  if (report && !report->message.empty()) text += ": " + report->message;
  std::vector<std::pair<int, std::string>> marks;
  if (stopping) {
    const std::string why = "rank " + std::to_string(processes_[i].rank) + " failed (" + how_ended(i) + ")";
    for (size_t j = 0; j < processes_.size(); ++j) {
      if (j != i && ranks_[j].running) marks.emplace_back(processes_[j].rank, why);
    }
  }
  if (!board_->publish(note_of(i, report, text), marks)) {
    say("cannot leave this machine's first failure in the job's store (" + board_->unreachable_why() +
        "): the other machines' launchers cannot name it, nor tell the ranks it stops from the one that failed");
  }
}

bool Attempt::name_job_wide_failure(const FailureNote& mine) {
  if (!board_) return false;
  board_->publish(mine, {});  // this machine's, as its ranks' reports now say it
  std::vector<FailureNote> notes = board_->others(options_.nnodes, options_.node_rank);
  notes.insert(notes.begin(), mine);  // first: a tie stays this machine's
  const std::optional<FailureNote> first = earliest_failure(notes);
  if (!first || first->node_rank == options_.node_rank) return false;
  // This machine's ranks failed after another machine's did, and most likely because of it
  // (a member gone, a peer's connections closed): the job's first failure is that one,
  // which this launcher could not see. This machine's own stays in the line, and in
  // failed_rank and the exit code (a restart is this machine's).
  result_.failure = "the job's first failure was on node " + std::to_string(first->node_rank) +
                    " (its launcher saw it): " + first->text + "; on this machine (node " +
                    std::to_string(options_.node_rank) + "): " + result_.failure;
  return true;
}

void Attempt::judge_by_last_processes() {
  if (options_.on_failure != LaunchOptions::OnFailure::kContinue || (result_.failed_rank < 0 && refused_.empty()) ||
      result_.interrupted_by != 0) {
    return;
  }
  std::vector<int> last(static_cast<size_t>(options_.nproc_per_node), -1);
  for (size_t i = 0; i < processes_.size(); ++i) last[static_cast<size_t>(processes_[i].local_rank)] = static_cast<int>(i);
  // The ranks whose last process did not exit 0, and why it was the last. Without this line
  // the job's output would end with the surviving ranks' own, and only the exit status
  // would say that it failed. With many ranks most share how they ended and why (96 ranks
  // once made a line of 7,000 characters, the first failure at its very end): the ranks
  // that share both are said once, as ranges, each why once, and the first failure first.
  std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::vector<int>>>>> by_why;
  for (size_t local = 0; local < last.size(); ++local) {
    const int i = last[local];
    if (i >= 0 && local::exited_cleanly(ranks_[static_cast<size_t>(i)].status)) continue;
    // A joiner the members refused: they went on without it, and their end is this rank's.
    if (i >= 0 && refused_.count(static_cast<size_t>(i)) != 0) continue;
    std::string why = "not replaced: no --replace_after_s";
    if (options_.replace_after.count() >= 0 && !job_stopped_.empty()) {
      why = "not replaced: the job's members stopped it";
    } else if (options_.replace_after.count() >= 0) {
      const bool due_later = std::any_of(replacements_.begin(), replacements_.end(),
                                         [&](const Replacement& r) { return r.local_rank == static_cast<int>(local); });
      why = due_later ? "its replacement was not due before the other ranks ended"
                      : replaced_[local] >= options_.max_replacements
                          ? (options_.max_replacements == 0 ? "replacements are off (--max_replacements=0)"
                                                            : "no replacements left (--max_replacements)")
                                                                      : "not replaced";
    }
    const std::string status = i < 0 ? "never started" : how_ended(static_cast<size_t>(i));
    auto w = std::find_if(by_why.begin(), by_why.end(), [&](const auto& g) { return g.first == why; });
    if (w == by_why.end()) w = by_why.insert(by_why.end(), {why, {}});
    auto h = std::find_if(w->second.begin(), w->second.end(), [&](const auto& g) { return g.first == status; });
    if (h == w->second.end()) h = w->second.insert(w->second.end(), {status, {}});
    h->second.push_back(options_.global_rank(static_cast<int>(local)));
  }
  std::string ended_badly;
  for (const auto& [why, statuses] : by_why) {
    std::string group;
    for (const auto& [status, ranks] : statuses) {
      group += std::string(group.empty() ? "" : ", ") + ranks_text(ranks) + ": " + status;
    }
    ended_badly += std::string(ended_badly.empty() ? "" : "; ") + group + " (" + why + ")";
  }
  if (!ended_badly.empty()) {
    // Without a failure of its own (only refused joiners failed; the others were stopped),
    // the job's outcome is the stop's, said where it began.
    if (result_.failed_rank < 0) return;
    say("the job failed; the first failure: " + result_.failure + "; the last process did not exit 0 for " +
        ended_badly);
    return;
  }
  std::string refused;
  for (const auto& [i, why] : refused_) refused += std::string(refused.empty() ? "" : ", ") + member_text(i);
  const std::string first = result_.failed_rank >= 0 ? "; the first failure: " + result_.failure : std::string();
  // For the launcher's last line (job_outcome.h): what the job went on after.
  if (result_.failed_rank >= 0) {
    result_.survived.push_back("rank " + std::to_string(result_.failed_rank) + " failed (" + result_.how +
                               ") and was replaced");
  }
  // Every later replacement too, not only the first failure's (each local rank's count of
  // replacements started; the first failure's own is said above).
  for (size_t local = 0; local < replaced_.size(); ++local) {
    const int rank = options_.global_rank(static_cast<int>(local));
    const int later = replaced_[local] - (rank == result_.failed_rank ? 1 : 0);
    if (later <= 0) continue;
    result_.survived.push_back("rank " + std::to_string(rank) + (rank == result_.failed_rank ? " failed again" : " failed") +
                               (later > 1 ? " " + std::to_string(later) + " times" : std::string()) +
                               " and was replaced");
  }
  if (refused.empty()) {
    say("every rank's last process exited 0 (failed ranks were replaced): the job succeeded" + first);
  } else {
    say("every rank's last process exited 0 or was a joiner that the members refused (" + refused +
        "), and they went on without it: the job succeeded" + first);
  }
  result_.exit_code = 0;
  result_.failed_rank = -1;
  result_.failure.clear();
  result_.how.clear();
}

// The first line of a rank's error, for the launcher's last line: whole, with a pointer to
// the rest.
static std::string first_line_of_failure(const std::string& failure, const std::string& where_the_rest_is) {
  const size_t end = failure.find('\n');
  if (end == std::string::npos) return failure;
  std::string line = failure.substr(0, end);
  // A first line that ends in a colon ("...: no usable libdistcomm_x.so. Searched:")
  // introduces what follows: cut it after its last whole sentence, where it has one.
  const size_t last_char = line.find_last_not_of(" \t");
  const size_t sentence = line.rfind(". ");
  if (last_char != std::string::npos && line[last_char] == ':' && sentence != std::string::npos) {
    line = line.substr(0, sentence + 1);
  }
  return line + " (the rest in " + where_the_rest_is + ")";
}

void Attempt::name_first_failure() {
  std::vector<std::optional<FailureReport>> reports(processes_.size());
  for (size_t i = 0; i < processes_.size(); ++i) {
    if (!processes_[i].error_file.empty()) reports[i] = FailureReport::read(processes_[i].error_file);
  }
  const int first = ranks_.first_failure([&](size_t i) -> std::optional<FailureReport> {
    if (refused_.count(i) != 0) {
      // Last of all, after every failure and every consequence: named only when nothing
      // else failed, and then it is no failure (below).
      FailureReport refused;
      refused.consequence = true;
      refused.unix_time_ns = std::numeric_limits<int64_t>::max();
      return refused;
    }
    if (reports[i]) return reports[i];
    const local::Child& c = ranks_[i];
    if (!c.stopped && WIFSIGNALED(c.status)) {
      FailureReport death;
      death.unix_time_ns = c.ended_ns - kUnseenDeathLagNs;
      return death;
    }
    return std::nullopt;
  });
  if (first < 0 || result_.interrupted_by != 0) return;
  if (refused_.count(static_cast<size_t>(first)) != 0) {
    // Only refused joiners failed: the members went on without them, and the job's outcome
    // is theirs.
    result_.failed_rank = -1;
    result_.exit_code = 0;
    result_.failure.clear();
    result_.how.clear();
    return;
  }
  const RankProcess* cause = &processes_[static_cast<size_t>(first)];
  const local::Child& process = ranks_[static_cast<size_t>(first)];
  const std::optional<FailureReport>& cause_report = reports[static_cast<size_t>(first)];
  result_.failed_rank = cause->rank;
  result_.exit_code = local::shell_exit_code(process.status);
  result_.how = how_ended(static_cast<size_t>(first));
  if (cause_report && process.stopped && WIFSIGNALED(process.status)) {
    // It reported its failure and was still on its way out when the stop's signal came:
    // the job failed by its error (exit code 1, as run_main's), not by this launcher's
    // signal (143 said "terminated", as if the job had been cancelled).
    result_.exit_code = 1;
    result_.how = "reported its error; the stop ended it by " + local::signal_name(WTERMSIG(process.status));
  }
  // After a stop for something outside this machine's ranks (the round ended: a machine went
  // away), their failures are its consequences: the round's end names the cause.
  const std::string failed = !result_.stopped_for.empty()    ? "failed after the round ended"
                             : ended_by_outside_stop(process) ? "was terminated first"
                                                              : "failed first";
  result_.failure = "rank " + std::to_string(cause->rank) + " (local rank " + std::to_string(cause->local_rank) +
                    ", pid " + std::to_string(process.pid) + ") " + failed + " (" + result_.how + ")" +
                    (cause_report ? ": " + cause_report->message : std::string());
  // Ranks that also failed on their own and said nothing (a signal, an exit code without
  // an error file): nothing else would mention them. Before the last word.
  std::string others;
  for (size_t i = 0; i < processes_.size(); ++i) {
    if (static_cast<int>(i) == first || !ranks_.failed(i) || ranks_[i].stopped || reports[i] || refused_.count(i) != 0) {
      continue;
    }
    others += std::string(others.empty() ? "" : ", ") + "rank " + std::to_string(processes_[i].rank) + " (pid " +
              std::to_string(ranks_[i].pid) + ", " + how_ended(i) + ")";
  }
  if (!others.empty()) say("also failed, with no error file: " + others);
  const std::string text = result_.failure;
  const bool elsewhere = name_job_wide_failure(note_of(static_cast<size_t>(first), cause_report, text));
  // The launcher's last word, one line, names the cause; the rank printed its whole error
  // above (a Desync's table, say).
  // The rank printed its whole error (run_main does), in its output: shown above, or in its
  // log file under --log_dir.
  const int cause_rank = processes_[static_cast<size_t>(first)].rank;
  const std::string log = router_.log_path(cause_rank);
  const std::string rest = log.empty() ? "rank " + std::to_string(cause_rank) + "'s output above" : log;
  if (elsewhere) {
    // The other machine's line first, whole (one line: its launcher's); this machine's
    // rank's error cut to its first line, as alone.
    const std::string own = first_line_of_failure(text, rest);
    say(result_.failure.substr(0, result_.failure.size() - text.size()) + own);
    return;
  }
  say(first_line_of_failure(result_.failure, rest));
}

}  // namespace internal
}  // namespace launch
}  // namespace distcomm
