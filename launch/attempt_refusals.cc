// An attempt's questions to the job's store about its refused joiners (the class:
// attempt_state.h; what a refusal is: refused_member.h; how the store is asked:
// JobStore::ask). Asked rather than pushed, so that a launcher on any machine sees its
// own ranks' refusals -- before, only node 0's launcher, which serves the store, learned of
// them (from the server's created-key hook), and another machine's replaced its refused
// rank again and again. Apart from attempt.cc, to keep each file short.
#include <algorithm>
#include <string>
#include <vector>

#include "launch/attempt_state.h"
#include "launch/refused_member.h"
#include "launch/replacement_notice.h"

namespace distcomm {
namespace launch {
namespace internal {
namespace {

// Takes the replacements due by `due_by` (all: Clock::time_point::max()) out of
// `replacements`, in order, telling `cancel` of each before it goes: what each way of not
// starting a replacement says, announces or undoes is the caller's.
template <typename Replacement, typename Cancel>
void cancel_replacements_due_by(std::vector<Replacement>& replacements, Clock::time_point due_by, Cancel&& cancel) {
  auto kept = replacements.begin();
  for (auto it = replacements.begin(); it != replacements.end(); ++it) {
    if (it->due > due_by) {
      *kept++ = *it;
      continue;
    }
    cancel(*it);
  }
  replacements.erase(kept, replacements.end());
}

}  // namespace

bool Attempt::ask_refusals(const std::vector<size_t>& which, bool must_ask) {
  if (store_ == nullptr) return true;
  std::vector<std::string> ids;
  std::vector<size_t> asked;
  for (const size_t i : which) {
    // A program that names its members itself has ids the launcher cannot know: not asked.
    if (i >= processes_.size() || refused_.count(i) != 0 || processes_[i].member_id.empty()) continue;
    ids.push_back(processes_[i].member_id);
    asked.push_back(i);
  }
  // With no id, a must_ask one still asks whether the members stopped the job (before a
  // replacement starts), unless that is known already (the mark stays).
  if (ids.empty() && (!must_ask || !job_stopped_.empty())) return true;
  const StoreWord word = store_->ask(ids, must_ask);
  // Not answered (the store was not reached, or quiet after that): not counted as asked, so
  // that the end's ask (take_refusals) asks for them again.
  if (!word.answered) return false;
  asked_refusal_.insert(asked.begin(), asked.end());
  if (job_stopped_.empty() && !word.stopped.empty()) note_job_stopped(word.stopped);
  for (const RefusedMember& member : word.refused) {
    // Ids are unique within an attempt; a mark of another machine's rank matches none here.
    for (const size_t i : asked) {
      if (processes_[i].member_id == member.id && refused_.count(i) == 0) note_refusal(i, member.why);
    }
  }
  return true;
}

void Attempt::note_job_stopped(const std::string& why) {
  job_stopped_ = why;
  // The members' first stop reason, its first line: a step's whole error can be long.
  const std::string first_line = why.substr(0, why.find('\n'));
  std::string cancelled;
  cancel_replacements_due_by(replacements_, Clock::time_point::max(), [&](const Replacement& r) {
    const int rank = options_.global_rank(r.local_rank);
    cancelled += std::string(cancelled.empty() ? "" : ", ") + std::to_string(rank);
    announce_no_successor(store_, options_, member_id_of(rank, r.number - 1), "the job's members stopped it");
    --replaced_[static_cast<size_t>(r.local_rank)];
  });
  say("the fault-tolerant job's members stopped it (" + first_line + "): no replacement is started any more" +
      (cancelled.empty() ? std::string() : " (not started: the replacement of rank(s) " + cancelled + ")") +
      "; a joiner started before ends on its own");
}

bool Attempt::ask_refusal(size_t i) {
  if (asked_refusal_.count(i) == 0) ask_refusals({i}, /*must_ask=*/false);
  return refused_.count(i) != 0;
}

void Attempt::ask_refusals_before_replacements() {
  // While stopping none starts (start_due_replacements): nothing to ask, turn after turn.
  if (store_ == nullptr || replacements_.empty() || ranks_.stopping()) return;
  const Clock::time_point now = Clock::now();
  std::vector<size_t> which;
  for (const Replacement& r : replacements_) {
    if (r.due > now) continue;
    // The process whose exit asked for it: the last one started for its local rank.
    for (size_t j = processes_.size(); j-- > 0;) {
      if (processes_[j].local_rank == r.local_rank) {
        if (!ranks_[j].running) which.push_back(j);
        break;
      }
    }
  }
  if (which.empty() && std::none_of(replacements_.begin(), replacements_.end(),
                                    [&](const Replacement& r) { return r.due <= now; })) {
    return;
  }
  // note_refusal takes a refused one's replacement out of replacements_ (not iterated here),
  // note_job_stopped all of them. Asked even shortly after an ask failed (must_ask): a
  // refused joiner replaced, or a joiner started into a stopped job, costs more than 2 s.
  if (ask_refusals(which, /*must_ask=*/true) || ranks_.running() > 0) return;
  // None of this machine's ranks runs (several machines: another's may take a replacement
  // in), and node 0's store does not answer: the job has most likely ended there, and a
  // joiner would wait for a store that is gone until its own timeout. No successor is
  // announced: that is a write to the store that just did not answer (its bound again).
  cancel_replacements_due_by(replacements_, now, [&](const Replacement& r) {
    say("rank " + std::to_string(options_.global_rank(r.local_rank)) + "'s replacement is not started: no rank of " +
        "this machine runs, and the job's store does not answer");
  });
}

void Attempt::take_refusals() {
  // Under --on_failure=stop the first failed exit stopped the job, whatever the members
  // made of it: a refusal changes nothing there.
  if (options_.on_failure != LaunchOptions::OnFailure::kContinue) return;
  // Those answered at their exit are not asked again: on another machine node 0's store may
  // have gone with the last ranks, and asking it would cost the connect's timeout for
  // nothing. What is left: failures seen while the job was stopping, and those whose ask
  // found no store then (node 0's launcher stopped a while): asked now, whatever came before.
  std::vector<size_t> which;
  for (size_t i = 0; i < processes_.size(); ++i) {
    if (!ranks_[i].running && !ranks_[i].stopped && ranks_.failed(i) && asked_refusal_.count(i) == 0) {
      which.push_back(i);
    }
  }
  if (which.empty()) return;  // nothing failed: no request (node 0's store may be gone)
  ask_refusals(which, /*must_ask=*/true);
}

}  // namespace internal
}  // namespace launch
}  // namespace distcomm
