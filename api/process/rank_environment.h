// What a launcher tells each rank it starts: torchrun's variables (RANK, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and distcomm's (the job's identity,
// the backend). spawn() sets them in each forked rank, the launcher (launch/) passes them to
// each rank it execs, with its own on top; written here once, so that the two cannot drift
// apart. init_process_group reads them (api/group/environment.cc).
//
// Header-only, so that the launcher, which does not link the core, uses the same code.
#pragma once

#include <cstdlib>
#include <map>
#include <string>

#include "api/process/job_identity.h"

namespace distcomm {
namespace local {

// One rank's place in its job and where the job meets.
struct RankEnvironment {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;        // among the ranks on this machine
  int local_world_size = 1;  // how many ranks run on this machine
  std::string master_addr = "127.0.0.1";  // where rank 0 serves the store
  int master_port = 0;
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
    return v;
  }

  // Sets them in this process's environment: a forked rank, before it runs its body.
  void export_here() const {
    for (const auto& [name, value] : variables()) ::setenv(name.c_str(), value.c_str(), 1);
  }
};

}  // namespace local
}  // namespace distcomm
