// spawn: fork-based, like torch.multiprocessing.spawn with start_method="fork".
//
// The children run fn in a copy of the caller's memory (no exec), so spawn is for programs
// that call it before they create threads or groups (the job store's thread, spawn's own,
// is never touched by a child). It is deliberately small; the
// launcher (tools/launch) is the full-featured way to start ranks of a program.
#include "api/process/spawn.h"

#include <memory>
#include <string>

#include "api/errors.h"
#include "api/init.h"
#include "api/process/failure_origin.h"
#include "api/process/job_identity.h"
#include "api/process/local_processes.h"
#include "api/process/local_ranks.h"
#include "api/process/rank_environment.h"
#include "api/store/server/tcp_store_server.h"

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
  watch.adopted_failure_hold = local::kAdoptedFailureHold;
  local::LocalRanks ranks(watch);
  // The job's store, served here as a launcher serves it: listening before the first rank
  // starts, destroyed after the last has ended, so that it outlives any rank (the survivors
  // of rank 0's death still meet in it). Its poll() loop runs in a thread of this process,
  // which the forked ranks do not have: their copies of its sockets are closed at the fork
  // (store/internal/close_on_fork.h), and a rank leaves by _exit, so no rank ever touches
  // the server object or ends the server. Forking beside that thread is safe: its loop takes
  // no lock a rank could need (glibc's fork keeps malloc's consistent).
  std::unique_ptr<TCPStoreServer> store;
  try {
    // Each call is its own job: a stray rank of another spawn() cannot join it.
    local::RankEnvironment job;
    job.world_size = job.local_world_size = nprocs;
    job.identity = new_job_identity();
    job.backend = options.backend;
    TCPStoreServerOptions so;
    so.bind_address = server_bind_address(job.master_addr, "");
    so.port = 0;  // the server takes a free port itself: no other process can take it first
    so.identity = job.identity;
    so.world_size = nprocs;
    store = std::make_unique<TCPStoreServer>(so);
    store->start();
    job.master_port = store->port();
    job.store_served_by_launcher = true;
    ranks.fork_ranks(nprocs, [&](int rank) {
      local::RankEnvironment mine = job;
      mine.rank = mine.local_rank = rank;
      mine.export_here();  // as a launcher would have set it
      try {
        fn(rank, nprocs);
      } catch (...) {
        // As run_main's report: a rank that adopted another's failure is not the cause.
        return local::report_of_current_exception(latest_group_failure_was_adopted(), latest_group_failure_lost_rank());
      }
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
