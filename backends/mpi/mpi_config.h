// The mpi backend's settings: the keys it declares (its plugin descriptor lists them) and
// their parsed values. No MPI here, so that the plugin built without Open MPI declares
// the same keys.
#pragma once

#include <climits>
#include <cstdint>
#include <map>
#include <string>

#include "api/plugin/plugin.h"

namespace distcomm {
namespace mpi {

// Ended by an entry whose name is nullptr (distcomm_plugin_v1::config_keys).
extern const distcomm_config_key kConfigKeys[];

struct MpiConfig {
  // "max_count_per_call": elements per MPI call; larger elementwise ops are split.
  int64_t max_count_per_call = INT_MAX;
  // "progress": "waiters" (true) or "thread" (false), see mpi_runtime.h.
  bool waiters_drive = true;
  // "iallreduce_algorithm": Open MPI's nonblocking all_reduce algorithm, 0 for its own choice.
  int iallreduce_algorithm = 3;
  // "agreement_check": whether collectives run the agreement check (mpi_agreement.h).
  bool agreement_check = true;
  // "local_world_size" (set by init): ranks on this host, to tell whether cores are shared.
  int local_ranks = 1;
  // "launcher" (set by init): empty when no launcher started the process.
  std::string launcher;

  // Throws InvalidArgument naming the key, the value and what it accepts.
  static MpiConfig parse(const std::map<std::string, std::string>& config);
};

}  // namespace mpi
}  // namespace distcomm
