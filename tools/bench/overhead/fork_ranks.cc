#include "tools/bench/overhead/fork_ranks.h"

#include <chrono>
#include <cstdio>

#include "api/process/local_processes.h"
#include "api/process/local_ranks.h"

namespace distcomm {
namespace bench {

bool fork_ranks(int nproc, const std::string& name, const std::function<void(int rank)>& fn) {
  local::RankWatchOptions watch;
  // No time limit; once a rank has failed, the others would wait for it until their
  // timeouts: they are killed at once (SIGKILL, no grace: a benchmark rank has nothing to
  // save, and a SIGTERM would let it write a trace dump first).
  watch.after_failure = local::AfterFailure::kLetEnd;
  watch.grace = std::chrono::milliseconds(0);
  local::LocalRanks ranks(watch);
  try {
    ranks.fork_ranks(nproc, [&](int rank) {
      fn(rank);
      return std::string();
    });
  } catch (const local::RankStartError& e) {
    std::fprintf(stderr, "%s: cannot start rank %d: %s\n", name.c_str(), e.rank, e.what());
    return false;
  } catch (const std::exception& e) {  // anything else before the ranks ran (no memory, ...)
    std::fprintf(stderr, "%s: cannot start the ranks: %s\n", name.c_str(), e.what());
    return false;
  }
  // Sleeps on the ranks' pidfds: the parent takes nothing from the ranks meanwhile.
  ranks.watch();
  for (size_t rank = 0; rank < ranks.size(); ++rank) {
    const local::Child& c = ranks[rank];
    if (c.stopped || !ranks.failed(rank)) continue;  // the kill's doing, or no failure
    std::fprintf(stderr, "%s rank %zu: %s\n", name.c_str(), rank, local::how_it_failed(c).c_str());
  }
  return ranks.first_seen_failure() < 0;
}

}  // namespace bench
}  // namespace distcomm
