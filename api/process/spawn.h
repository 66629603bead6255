// spawn: start nprocs ranks of a function on this machine, like torch.multiprocessing.spawn.
#pragma once

#include <chrono>
#include <functional>
#include <string>

namespace distcomm {

struct SpawnOptions {
  // Exported as DISTCOMM_BACKEND to each rank; empty: none (init_process_group's default,
  // auto, or what the environment already says).
  std::string backend;
  // How long the whole job may run before every rank is stopped (0: no limit).
  std::chrono::seconds timeout{0};
  // Seconds between SIGTERM and SIGKILL when stopping the ranks after a failure.
  std::chrono::seconds grace{5};
};

// Forks nprocs children; child r gets RANK=r, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR=127.0.0.1, a free MASTER_PORT, and a fresh DISTCOMM_RUN_ID and
// DISTCOMM_STORE_TOKEN for this call (api/process/job_identity.h) in its environment, with
// DISTCOMM_STORE_SERVED_BY=launcher: the calling process serves the job's store there, in a
// thread of its own, until every rank has ended, so that the store outlives any rank (rank 0
// is a client like the others). Then child r runs fn(r, nprocs)
// (fn usually starts with init_process_group()). If a rank throws, exits non-zero or dies
// on a signal, the others are stopped and spawn throws Error naming the rank that failed
// first -- by the time it threw (or was seen to die), not the order failures were noticed:
// in a cascade (rank 1 throws, rank 0 then loses its connection to rank 1), rank 1 is the
// cause -- and how it failed. Returns when every rank has exited 0.
void spawn(int nprocs, const std::function<void(int rank, int world_size)>& fn,
           const SpawnOptions& options = {});

// The body of a program that starts its own ranks: under a launcher (launched_as_rank():
// tools/launch, torchrun, mpirun, srun) it runs rank_body once, as the rank it was given;
// run by hand it spawns nprocs ranks that each run rank_body.
void run_as_rank_or_spawn(int nprocs, const std::function<void()>& rank_body, const SpawnOptions& options = {});

}  // namespace distcomm
