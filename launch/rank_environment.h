// The environment each rank starts with: the launcher's own, plus torchrun's variables.
#pragma once

#include <string>
#include <vector>

#include "launch/launch_options.h"

namespace distcomm {
namespace launch {

// How many times the job was restarted before the attempt a rank belongs to (0 at first).
constexpr char kRestartCountVariable[] = "DISTCOMM_RESTART_COUNT";

// "KEY=VALUE" entries: `base` (usually the launcher's environ) with the variables every
// launcher gives a rank (api/process/rank_environment.h: RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, and DISTCOMM_BACKEND, DISTCOMM_RUN_ID,
// DISTCOMM_STORE_TOKEN when set, DISTCOMM_STORE_SERVED_BY=launcher with
// options.serve_store, never inherited), GROUP_RANK, GROUP_WORLD_SIZE and the restart count
// (DISTCOMM_RESTART_COUNT, TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_MAX_RESTARTS) replaced or
// added. Rank variables of other launchers (mpirun's
// OMPI_COMM_WORLD_*, Slurm's SLURM_PROCID...) are dropped so that a rank cannot read two
// different answers to "who am I". error_file, when not empty, becomes DISTCOMM_ERROR_FILE:
// where the rank reports its failure (api/process/failure_report.h).
std::vector<std::string> rank_environment(const LaunchOptions& options, int local_rank, int master_port,
                                          const char* const* base, const std::string& error_file = "");

// A rank's environment (rank_environment's) for the number-th replacement of rank `rank`:
// with DISTCOMM_FT_JOIN=1 and DISTCOMM_FT_MEMBER_ID=rank<rank>+<number>, so that it joins
// the running job as a new member (ft/manager.h) instead of claiming the dead one's place.
std::vector<std::string> replacement_environment(std::vector<std::string> env, int rank, int number);

}  // namespace launch
}  // namespace distcomm
