// An attempt's questions to the job's store about its refused joiners (the class:
// attempt_state.h; what a refusal is: refused_member.h; how the store is asked:
// JobStore::refusals). Asked rather than pushed, so that a launcher on any machine sees its
// own ranks' refusals -- before, only node 0's launcher, which serves the store, learned of
// them (from the server's created-key hook), and another machine's replaced its refused
// rank again and again. Apart from attempt.cc, to keep each file short.
#include <string>
#include <vector>

#include "launch/attempt_state.h"
#include "launch/refused_member.h"

namespace distcomm {
namespace launch {
namespace internal {

void Attempt::ask_refusals(const std::vector<size_t>& which) {
  if (store_ == nullptr) return;
  std::vector<std::string> ids;
  std::vector<size_t> asked;
  for (const size_t i : which) {
    // A program that names its members itself has ids the launcher cannot know: not asked.
    if (i >= processes_.size() || refused_.count(i) != 0 || processes_[i].member_id.empty()) continue;
    ids.push_back(processes_[i].member_id);
    asked.push_back(i);
    asked_refusal_.insert(i);
  }
  if (ids.empty()) return;
  for (const RefusedMember& member : store_->refusals(ids)) {
    // Ids are unique within an attempt; a mark of another machine's rank matches none here.
    for (const size_t i : asked) {
      if (processes_[i].member_id == member.id && refused_.count(i) == 0) note_refusal(i, member.why);
    }
  }
}

bool Attempt::ask_refusal(size_t i) {
  if (asked_refusal_.count(i) == 0) ask_refusals({i});
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
  // note_refusal takes a refused one's replacement out of replacements_ (not iterated here).
  ask_refusals(which);
}

void Attempt::take_refusals() {
  // Under --on_failure=stop the first failed exit stopped the job, whatever the members
  // made of it: a refusal changes nothing there.
  if (options_.on_failure != LaunchOptions::OnFailure::kContinue) return;
  // Those asked at their exit are not asked again: on another machine node 0's store may
  // have gone with the last ranks, and asking it would cost the connect's timeout and a
  // line for nothing. What is left: failures seen while the job was stopping.
  std::vector<size_t> which;
  for (size_t i = 0; i < processes_.size(); ++i) {
    if (!ranks_[i].running && !ranks_[i].stopped && ranks_.failed(i) && asked_refusal_.count(i) == 0) {
      which.push_back(i);
    }
  }
  ask_refusals(which);
}

}  // namespace internal
}  // namespace launch
}  // namespace distcomm
