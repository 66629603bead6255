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
  // The survivors quote this word in their stop line ("not replaced: rank1: ..."). The
  // caller's text for a budget spent says how many the rank has had, which under
  // --max_replacements=0 is none of its business: said as replacements being off.
  const std::string again = "not replaced again";
  const std::string word = options.max_replacements == 0 && why.rfind(again, 0) == 0
                               ? "not replaced: " + replacements_used_up(0, 0, 0)
                               : why;
  store->tell(successor_key(ended), "none|" + word);
}

std::string replacements_used_up(int rank, int replaced, int max_replacements) {
  if (max_replacements == 0) return "replacements are off (--max_replacements=0)";
  return "rank " + std::to_string(rank) + " has had " + std::to_string(replaced) +
         (replaced == 1 ? " replacement" : " replacements") + " (--max_replacements=" +
         std::to_string(max_replacements) + ")";
}

}  // namespace launch
}  // namespace distcomm
