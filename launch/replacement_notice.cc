#include "launch/replacement_notice.h"

namespace distcomm {
namespace launch {

bool announces_replacements(const JobStore* store, const LaunchOptions& options) {
  // Only a launcher that leaves the others running (--on_failure=continue) replaces a rank;
  // only node 0's serves the store (another machine's reads it, and says nothing: its
  // members' survivors stop as before, not knowing).
  return store != nullptr && options.node_rank == 0 && options.on_failure == LaunchOptions::OnFailure::kContinue &&
         options.replace_after.count() >= 0;
}

void announce_replaced_ranks(JobStore* store, const LaunchOptions& options) {
  if (!announces_replacements(store, options)) return;
  std::string ranks;
  for (int local = 0; local < options.nproc_per_node; ++local) {
    ranks += (ranks.empty() ? "" : ",") + std::to_string(options.global_rank(local));
  }
  store->tell(replaced_ranks_key(), ranks);
}

void announce_successor(JobStore* store, const LaunchOptions& options, const std::string& ended,
                        const std::string& successor, std::chrono::steady_clock::time_point due) {
  if (!announces_replacements(store, options)) return;
  // In wall-clock time: the members compare it with their own clocks, on other hosts too
  // (they bound their wait by their recovery timeout whatever it says).
  const auto wall = std::chrono::system_clock::now() +
                    std::chrono::duration_cast<std::chrono::system_clock::duration>(
                        due - std::chrono::steady_clock::now());
  const long long ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(wall.time_since_epoch()).count();
  store->tell(successor_key(ended), "due|" + successor + "|" + std::to_string(ms));
}

void announce_no_successor(JobStore* store, const LaunchOptions& options, const std::string& ended,
                           const std::string& why) {
  if (!announces_replacements(store, options)) return;
  store->tell(successor_key(ended), "none|" + why);
}

}  // namespace launch
}  // namespace distcomm
