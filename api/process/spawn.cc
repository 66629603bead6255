// spawn: fork-based, like torch.multiprocessing.spawn with start_method="fork".
//
// The children run fn in a copy of the caller's memory (no exec), so spawn is for programs
// that call it before they create threads or groups. It is deliberately small; the
// launcher (tools/launch) is the full-featured way to start ranks of a program.
#include "api/process/spawn.h"

#include <string>

#include "api/errors.h"
#include "api/init.h"
#include "api/process/job_identity.h"
#include "api/process/local_processes.h"
#include "api/process/local_ranks.h"
#include "api/process/rank_environment.h"

namespace distcomm {

void spawn(int nprocs, const std::function<void(int rank, int world_size)>& fn, const SpawnOptions& options) {
  if (nprocs < 1) throw InvalidArgument("spawn: nprocs must be at least 1, got " + std::to_string(nprocs));
  if (!fn) throw InvalidArgument("spawn: fn is empty");
  if (options.timeout.count() < 0 || options.grace.count() < 0) {
    throw InvalidArgument("spawn: timeout and grace must not be negative");
  }
  local::RankWatchOptions watch;
  watch.time_limit = options.timeout;
  watch.grace = options.grace;
  watch.after_failure = local::AfterFailure::kTerminate;
  local::LocalRanks ranks(watch);
  try {
    // Each call is its own job: a stray rank of another spawn() cannot join it.
    local::RankEnvironment job;
    job.world_size = job.local_world_size = nprocs;
    job.master_port = local::pick_free_port();
    job.identity = new_job_identity();
    job.backend = options.backend;
    ranks.fork_ranks(nprocs, [&](int rank) {
      local::RankEnvironment mine = job;
      mine.rank = mine.local_rank = rank;
      mine.export_here();  // as a launcher would have set it
      fn(rank, nprocs);
      return std::string();
    });
  } catch (const std::runtime_error& e) {
    throw Error(std::string("spawn: cannot start the ranks: ") + e.what());
  }

  ranks.watch();
  if (ranks.first_seen_failure() >= 0) {
    // Now that every rank has ended and said why, the one that failed first by time.
    const int cause = ranks.first_failure();
    throw Error("spawn: rank " + std::to_string(cause) + " of " + std::to_string(nprocs) +
                " failed first: " + local::how_it_failed(ranks[static_cast<size_t>(cause)]) +
                "; the other ranks were stopped");
  }
  if (ranks.stop_cause() == local::StopCause::kTimeLimit) {
    throw Timeout("spawn: the ranks were still running after " + std::to_string(options.timeout.count()) +
                  "s (SpawnOptions::timeout); all were stopped");
  }
}

void run_as_rank_or_spawn(int nprocs, const std::function<void()>& rank_body, const SpawnOptions& options) {
  if (launched_as_rank()) {
    rank_body();
    return;
  }
  spawn(nprocs, [&rank_body](int, int) { rank_body(); }, options);
}

}  // namespace distcomm
