// What a launcher tells each rank it starts: torchrun's variables (RANK, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and distcomm's (the job's identity,
// the backend, who serves the store). spawn() sets them in each forked rank, the launcher
// (launch/) passes them to each rank it execs, with its own on top; written here once, so
// that the two cannot drift apart. init_process_group reads them (api/group/environment.cc).
//
// Header-only, so that the launcher, which does not link the core, uses the same code.
#pragma once

#include <cstdlib>
#include <map>
#include <string>

#include "api/process/job_identity.h"

namespace distcomm {
namespace local {

// Set to kStoreServedByLauncher by a launcher that serves the job's store at MASTER_ADDR:
// MASTER_PORT itself (tools/launch, spawn()): a process that outlives every rank, so that
// the survivors of any rank's death, rank 0's included, still meet there. Rank 0 then
// connects to it as a client, like every other rank. Unset: rank 0 serves it (a job started
// by hand, mpirun, srun, the self-launching examples, elastic rounds). torchrun's analogue is
// TORCHELASTIC_USE_AGENT_STORE. init_process_group reads it (api/group/environment.cc) for
// env:// only: an explicit tcp://host:port names a store the launcher does not serve.
constexpr char kStoreServedByVariable[] = "DISTCOMM_STORE_SERVED_BY";
constexpr char kStoreServedByLauncher[] = "launcher";
// Where the store's server listens instead of MASTER_ADDR's address ("*": every interface),
// the user's to set: read by rank 0 and by a launcher that serves the store alike.
constexpr char kStoreBindVariable[] = "DISTCOMM_STORE_BIND";
// A process started to replace a failed rank of a job that goes on without it (ft/manager.h):
// "1" in kJoinVariable, and its own member id ("rank<R>+<n>", the n-th replacement of R).
constexpr char kFtJoinVariable[] = "DISTCOMM_FT_JOIN";
constexpr char kFtMemberIdVariable[] = "DISTCOMM_FT_MEMBER_ID";

// One rank's place in its job and where the job meets.
struct RankEnvironment {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;        // among the ranks on this machine
  int local_world_size = 1;  // how many ranks run on this machine
  std::string master_addr = "127.0.0.1";  // where the store is served
  int master_port = 0;
  // The launcher serves the store there (kStoreServedByVariable); else rank 0 does.
  bool store_served_by_launcher = false;
  JobIdentity identity;  // exported where not empty
  std::string backend;   // DISTCOMM_BACKEND, where not empty

  // Name -> value, in name order.
  std::map<std::string, std::string> variables() const {
    std::map<std::string, std::string> v = {
        {"RANK", std::to_string(rank)},
        {"WORLD_SIZE", std::to_string(world_size)},
        {"LOCAL_RANK", std::to_string(local_rank)},
        {"LOCAL_WORLD_SIZE", std::to_string(local_world_size)},
        {"MASTER_ADDR", master_addr},
        {"MASTER_PORT", std::to_string(master_port)},
    };
    if (!identity.run_id.empty()) v[kRunIdVariable] = identity.run_id;
    if (!identity.token.empty()) v[kStoreTokenVariable] = identity.token;
    if (!backend.empty()) v["DISTCOMM_BACKEND"] = backend;
    if (store_served_by_launcher) v[kStoreServedByVariable] = kStoreServedByLauncher;
    return v;
  }

  // Sets them in this process's environment: a forked rank, before it runs its body. A
  // served-by inherited from the caller's own launcher is not this job's: it goes.
  void export_here() const {
    if (!store_served_by_launcher) ::unsetenv(kStoreServedByVariable);
    for (const auto& [name, value] : variables()) ::setenv(name.c_str(), value.c_str(), 1);
  }
};

}  // namespace local
}  // namespace distcomm
