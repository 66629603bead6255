#include "ft/joiner_refusal.h"

#include <algorithm>

#include "ft/liveness.h"
#include "ft/manager.h"
#include "ft/store_keys.h"

namespace distcomm {
namespace ft {

std::vector<std::string> joiners_behind_failures(Store& store, uint64_t first, const Generation& last) {
  if (first < 2) return {};
  const std::vector<std::optional<Store::Bytes>> read = read_present(store, {keys::members(first - 1), keys::members(first)});
  if (!read[0] || !read[1]) return {};
  const Generation before = Generation::decode(first - 1, to_string(*read[0]));
  const Generation took_in = Generation::decode(first, to_string(*read[1]));
  // The generation before the run committed a step (the next one began past its start): its
  // members trained fine on their own. One that failed at once tells nothing of them.
  if (took_in.committed_steps <= before.committed_steps) return {};
  std::vector<std::string> joiners;
  for (const std::string& id : last.members) {
    if (std::find(before.members.begin(), before.members.end(), id) == before.members.end()) joiners.push_back(id);
  }
  // Nobody came (the same failure with fewer members), or nobody of the members before is
  // left to hold the state and go on: not the joiners' doing, as far as the store can tell.
  if (joiners.empty() || joiners.size() == last.members.size()) return {};
  return joiners;
}

std::string refusal_mark(uint64_t step, uint64_t first, uint64_t last, const std::string& first_why) {
  return std::string(kRefusedMark) + "step " + std::to_string(step) + " failed on every member in " +
         std::to_string(kSameStepFailures) + " generations in a row (generations " + std::to_string(first) + " to " +
         std::to_string(last) + ") from the one that took it in, and the members before it had committed steps: "
         "its step cannot work with theirs (another model, other parameters?), so the members go on without "
         "it. The first failure: " +
         first_why;
}

std::string refused_message(const std::string& id, const std::string& mark) {
  const std::string why = mark.rfind(kRefusedMark, 0) == 0 ? mark.substr(sizeof(kRefusedMark) - 1) : mark;
  return "ft: joiner '" + id + "' was refused, and ends here; the job goes on without it: " + why;
}

void say_job_stopped(Store& store, const std::string& why) noexcept {
  try {
    store.compare_set(keys::kStopped, {}, to_bytes(why));
  } catch (...) {
    // Best-effort: a joiner that cannot read it waits out its recovery timeout, as before.
  }
}

}  // namespace ft
}  // namespace distcomm
