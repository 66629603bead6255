// Manager::same_step_failures and Manager::keeps_failing (manager.h): whether a step that
// failed again stops the job (StepKeepsFailing), refuses the joiners behind its failures
// (joiner_refusal.h), or is retried. Decided from the store alone, the same on every member.
// A step aborted for a stall of the store that was waited out (store_stall.h,
// kStoreStallAbort) is not counted: the store stalling three times in one step stopped the job.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "api/logging.h"
#include "ft/joiner_refusal.h"
#include "ft/manager.h"
#include "ft/store_keys.h"
#include "ft/store_stall.h"

namespace distcomm {
namespace ft {

int Manager::same_step_failures(uint64_t s, std::string* first_why) {
  // From the store, not from what this member saw: the generation records and their step
  // verdicts are the same for every member (a joiner that came in the middle of the run
  // included), so every member counts the same and all of them stop at the same generation.
  // The verdicts are still there: a generation's keys are forgotten only after a later one
  // commits a step, and none of these did.
  int count = 1;
  for (uint64_t k = generation_.number - 1; k >= 1 && count < kSameStepFailures; --k) {
    const std::vector<std::optional<Store::Bytes>> read = read_present(*store_, {keys::members(k), keys::verdict(k, s)});
    if (!read[0] || !read[1]) break;
    const Generation before = Generation::decode(k, to_string(*read[0]));
    const std::string verdict = to_string(*read[1]);
    // Generation k failed step s when its verdict of s is "abort" (it may have committed
    // steps before s: the first of the run often did). Other members (one was lost, or one
    // joined): not the same failure. Nor a stall of the store waited out (store_stall.h): no
    // failure of the step, it ends the run as a generation of other members does.
    if (before.members != generation_.members || verdict.rfind("abort|", 0) != 0) break;
    if (is_store_stall_abort(verdict.substr(verdict.find('|') + 1))) break;
    *first_why = verdict.substr(verdict.find('|') + 1);
    ++count;
  }
  return count;
}

std::string Manager::keeps_failing(uint64_t s, const std::string& why) {
  // This generation's abort was a stall of the store, waited out: retrying is what helps.
  if (is_store_stall_abort(why)) return "";
  std::string first_why = why;
  const int failed = same_step_failures(s, &first_why);
  // Decided from the store alone (the generations' member lists and verdicts), which every
  // member reads the same: a member's own view of who is gone (/proc on its host, a dead mark
  // it may or may not have read yet) made members on different hosts decide differently,
  // some stopping while the others formed a generation and fenced them. A member lost
  // between generations changes the next one's list, which starts the count again; one lost
  // in the last of them does not undo the two failures before it.
  if (failed < kSameStepFailures) return "";
  const uint64_t g = generation_.number, first = g + 1 - uint64_t(failed);
  // The run began when joiners came in, and the members before them trained fine: the
  // joiners are refused rather than the job stopped (joiner_refusal.h). Every member writes
  // their dead marks (the same text: the first stands), so that the next generation, formed
  // by whoever comes first, leaves them out; the members redo the step without them.
  const std::vector<std::string> refused = joiners_behind_failures(*store_, first, generation_);
  if (!refused.empty()) {
    const std::string mark = refusal_mark(s, first, generation_, refused, first_why);
    for (const std::string& id : refused) liveness_->mark_dead(id, mark);
    if (std::find(refused.begin(), refused.end(), id_) != refused.end()) return refused_message(id_, mark);
    if (generation_.rank_of(id_) == 0) {
      log_line("ft: " + generation_.describe() + " refuses " + id_list(refused) + " and goes on without: " + mark);
    }
    return "";
  }
  std::string stop = "ft: step " + std::to_string(s) + " failed in " + std::to_string(failed) +
         " generations in a row (generations " + std::to_string(g + 1 - uint64_t(failed)) + " to " +
         std::to_string(g) + ", each of " + id_list(generation_.members) +
         ") with the same members: it is not a lost rank but an error that every member hits each time, so "
         "another generation cannot help; the job stops here (member '" +
         id_ + "'). The first failure: " + first_why;
  // For the joiners still waiting to be taken in: no generation will come for them.
  say_job_stopped(*store_, stop);
  return stop;
}

}  // namespace ft
}  // namespace distcomm
