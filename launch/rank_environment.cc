#include "launch/rank_environment.h"

#include <cstring>
#include <map>

#include "api/process/failure_report.h"
#include "api/process/rank_environment.h"
#include "api/diagnostics/timeline.h"
#include "api/diagnostics/trace_dump.h"
#include "launch/refused_member.h"

namespace distcomm {
namespace launch {
namespace {

// Variables a launcher sets to say which rank a process is. Inherited from an outer
// launcher (the launcher itself run under mpirun or srun), they would contradict ours.
bool is_foreign_rank_variable(const std::string& name) {
  static const char* const kForeign[] = {
      "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
      "OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_RANK", "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS",
      "SLURM_LOCALID",
  };
  for (const char* f : kForeign) {
    if (name == f) return true;
  }
  return false;
}

}  // namespace

std::vector<std::string> rank_environment(const LaunchOptions& options, int local_rank, int master_port,
                                          const char* const* base, const std::string& error_file) {
  local::RankEnvironment rank;
  rank.rank = options.global_rank(local_rank);
  rank.world_size = options.world_size();
  rank.local_rank = local_rank;
  rank.local_world_size = options.nproc_per_node;
  rank.master_addr = options.master_addr;
  rank.master_port = master_port;
  rank.identity = options.identity;
  rank.backend = options.backend;
  rank.store_served_by_launcher = static_cast<bool>(options.serve_store);
  std::map<std::string, std::string> ours = rank.variables();
  // What the launcher adds: where this machine stands among the job's machines, which
  // attempt this is, under distcomm's name and torchrun's (programs written against
  // torchrun read the latter), and how many restarts the job allows.
  ours["GROUP_RANK"] = std::to_string(options.node_rank);
  ours["GROUP_WORLD_SIZE"] = std::to_string(options.nnodes);
  ours[kRestartCountVariable] = std::to_string(options.restart_count);
  ours["TORCHELASTIC_RESTART_COUNT"] = std::to_string(options.restart_count);
  ours["TORCHELASTIC_MAX_RESTARTS"] = std::to_string(options.max_restarts);
  if (!options.rdzv_id.empty()) ours["TORCHELASTIC_RUN_ID"] = options.rdzv_id;
  // torchrun's role variables: one role per job here, so its ranks are the job's.
  ours["ROLE_NAME"] = options.role;
  ours["ROLE_RANK"] = std::to_string(rank.rank);
  ours["ROLE_WORLD_SIZE"] = std::to_string(rank.world_size);
  // As torchrun: several ranks on a machine each start an OpenMP (MKL, libtorch) pool as
  // wide as the machine unless told otherwise, and oversubscribe its cores. Where the
  // caller set it, the caller's value stands (the loop below keeps it).
  const bool omp_given = [&] {
    for (const char* const* e = base; e != nullptr && *e != nullptr; ++e) {
      if (std::strncmp(*e, "OMP_NUM_THREADS=", 16) == 0) return true;
    }
    return false;
  }();
  if (options.nproc_per_node > 1 && !omp_given) ours["OMP_NUM_THREADS"] = "1";
  if (!error_file.empty()) ours[kErrorFileVariable] = error_file;
  if (!options.trace_dir.empty()) ours[kTraceDirVariable] = options.trace_dir;
  if (!options.timeline.empty()) ours[kTimelineVariable] = options.timeline;

  std::vector<std::string> env;
  for (const char* const* e = base; e != nullptr && *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    std::string name = eq ? std::string(*e, eq - *e) : std::string(*e);
    // Who serves the store is this launcher's to say: one inherited from an outer job is
    // not this job's, and would make rank 0 wait for a server nobody starts.
    // Nor is a replacement's identity (an outer fault-tolerant job's): a replacement gets
    // its own from the attempt (replacement_environment).
    if (ours.count(name) || is_foreign_rank_variable(name) || name == local::kStoreServedByVariable ||
        name == local::kFtJoinVariable || name == local::kFtMemberIdVariable) {
      continue;
    }
    env.emplace_back(*e);
  }
  for (const auto& kv : ours) env.push_back(kv.first + "=" + kv.second);
  return env;
}

std::vector<std::string> replacement_environment(std::vector<std::string> env, int rank, int number) {
  env.push_back(std::string(local::kFtJoinVariable) + "=1");
  env.push_back(std::string(local::kFtMemberIdVariable) + "=" + member_id_of(rank, number));
  return env;
}

}  // namespace launch
}  // namespace distcomm
