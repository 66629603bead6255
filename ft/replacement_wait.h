// Fewer than min_members left, and replacements on their way: what the survivors wait for.
//
// Several members can die at once (a machine of 3 ranks lost, a chaos test's kill of 3 of
// 4). The survivors find themselves fewer than the program's min_members within a tenth of a
// second, while the launcher's replacements (--replace_after_s) come a second later: stopping
// then ended a job that was about to be whole again. torchrun (--nnodes=MIN:MAX) and
// torchft's quorum wait for enough members instead. So does Manager::form_next now, when a
// replacement is due: the launcher that serves the store says which ranks it replaces and,
// as each of their processes ends, whether a replacement comes and when
// (launch/replacement_notice.h; keys replaced_ranks and successor/<id>, store_keys.h). The
// survivors wait until enough joiners wait to be taken in (then form the next generation
// with them), and no longer than the forming's deadline (recovery_timeout); they stop at once,
// with the error of before, when no replacement is due (no launcher says it replaces, its
// replacements are used up, a replacement that died has no successor).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "api/store/store.h"
#include "ft/generation.h"
#include "ft/liveness.h"

namespace distcomm {
namespace ft {

// What may still come to `formed`, a generation short of members, as the store says now.
struct ReplacementOutlook {
  // Whether a launcher says that it replaces ranks of this job (keys::kReplacedRanks). Not:
  // nothing is awaited, not even a joiner waiting now -- the job stops as it did before
  // replacements were announced, and the waiting joiners learn it (manager_job_stop_test).
  bool announced = false;
  // Registered joiners, not members of `formed`, not gone: they can be taken in now.
  std::vector<std::string> joiners;
  // Replacements the launcher announced that have not registered yet (not started, or
  // starting), due before the deadline.
  std::vector<std::string> coming;
  // Announced, but due after the deadline: they would come too late.
  std::vector<std::string> too_late;
  // Members of the replaced ranks that are gone and of which the launcher has not said yet
  // what follows (it says within moments of seeing the exit).
  std::vector<std::string> unsaid;
  // Why the others are not replaced, "rank2+1: not replaced again: ...", for messages.
  std::vector<std::string> none;
};

// Reads the launcher's words and the joiners. Only the ranks the launcher replaces, and only
// those whose first member has the launcher's id ("rank<R>"): a program that names its own
// members is not followed (its joiners still count among `joiners`).
ReplacementOutlook replacement_outlook(Store& store, Liveness& liveness, const Generation& formed,
                                       std::chrono::steady_clock::time_point deadline);

}  // namespace ft
}  // namespace distcomm
