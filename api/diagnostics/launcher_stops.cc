// GroupFailure::stopped_by_launcher: which lost peers their launcher stopped (it marks them in
// the job's store before its SIGTERM: api/process/launcher_stop.h), so that a backend names
// them apart from the rank whose failure made it stop them. Apart from group_failure.cc,
// which records and publishes; this only reads the launcher's marks.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/diagnostics/bounded_call.h"
#include "api/diagnostics/group_failure.h"
#include "api/process/launcher_stop.h"
#include "api/store/prefix_store.h"
#include "api/store/store.h"

namespace distcomm {
namespace {

// The marks are written before the stop's signal, so one read finds them; a store that
// does not answer this soon leaves the peers named as lost, as before, rather than hold up
// the loss's report (its server may be on the machine that went).
constexpr std::chrono::milliseconds kMarksAnswerWait{300};

// The job's store under the group's board: the launcher's marks are outside every group's
// prefix.
StorePtr job_store_under(StorePtr at) {
  while (const auto* prefixed = dynamic_cast<const PrefixStore*>(at.get())) at = prefixed->base();
  return at;
}

}  // namespace

std::vector<std::pair<int, std::string>> GroupFailure::stopped_by_launcher(const std::vector<int>& group_ranks) const {
  std::vector<std::pair<int, std::string>> stopped;
  if (!board_ || group_ranks.empty() || store_unanswered(board_)) return stopped;
  std::vector<int> asked;  // group ranks whose world rank is known
  std::vector<std::string> keys;
  for (int r : group_ranks) {
    const int world = world_rank_of(r);
    if (world < 0) continue;  // a group with ranks of its own (ft's generations): no job rank to ask for
    asked.push_back(r);
    keys.push_back(launcher_stop_key(world));
  }
  if (keys.empty()) return stopped;
  const StorePtr store = job_store_under(board_);
  const std::optional<std::vector<std::optional<Store::Bytes>>> marks =
      internal::call_with_limit<std::vector<std::optional<Store::Bytes>>>(
          [store, keys] { return read_present(*store, keys); }, kMarksAnswerWait);
  if (!marks) return stopped;
  for (size_t i = 0; i < asked.size() && i < marks->size(); ++i) {
    if ((*marks)[i]) stopped.emplace_back(asked[i], to_string(*(*marks)[i]));
  }
  return stopped;
}

}  // namespace distcomm

extern "C" size_t distcomm_group_failure_launcher_stops(const distcomm::GroupFailure* failure, const int* group_ranks,
                                                         size_t count, unsigned char* stopped, char* why,
                                                         size_t why_size) {
  const std::vector<int> ranks(group_ranks, group_ranks + count);
  const std::vector<std::pair<int, std::string>> found = failure->stopped_by_launcher(ranks);
  for (size_t i = 0; i < count; ++i) {
    stopped[i] = 0;
    for (const auto& [rank, reason] : found) {
      if (rank == ranks[i]) stopped[i] = 1;
    }
  }
  if (why != nullptr && why_size > 0) {
    const std::string first = found.empty() ? "" : found.front().second;
    const size_t n = std::min(first.size(), why_size - 1);
    first.copy(why, n);
    why[n] = '\0';
  }
  return found.size();
}
