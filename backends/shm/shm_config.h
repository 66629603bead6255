// The shm backend's settings: BackendOptions::config keys, declared to the core in the
// plugin's descriptor (kConfigKeys, where each key's default and meaning are written once).
//
// Keys that change the shared layout or the algorithm (slot_bytes, slots, small_bytes,
// p2p_chunk_bytes, p2p_depth) must agree on every rank; group creation checks that and
// names the rank that differs.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "api/plugin/plugin.h"

namespace distcomm {
namespace shm {

// Ended by an entry whose name is nullptr (distcomm_plugin_v1::config_keys).
extern const distcomm_config_key kConfigKeys[];

struct ShmConfig {
  size_t slot_bytes = size_t{1} << 20;
  int slots = 4;
  size_t small_bytes = size_t{16} << 10;
  size_t p2p_chunk_bytes = size_t{32} << 10;
  int p2p_depth = 4;
  // Testing: the number of a group's first round (0 normally), so that a test runs rounds
  // across 2^32 without 2^32 ops first.
  uint64_t first_round = 0;
  std::chrono::microseconds spin{20};
  std::chrono::microseconds yield{200};
  // Whether shm_yield_us was set: the wait policy then keeps `yield` where it would not
  // yield by default (a cgroup CPU quota alone short of a CPU per rank: shm_cpus.h).
  bool yield_set = false;
  std::chrono::microseconds nap{1000};
  // Ranks of the job on this host, from the launcher (core key local_world_size); 0 when
  // unknown. Waiters spin only when every rank can have a core.
  int local_world_size = 0;

  // The settings every rank must share, as text ("slot_bytes=1048576 slots=4 ...").
  std::string shared_signature() const;
};

// Reads the shm_* keys (and local_world_size) of a backend config; other keys are left to
// other backends.
// Throws InvalidArgument naming the key, its value and what is accepted.
ShmConfig parse_shm_config(const std::map<std::string, std::string>& config);

}  // namespace shm
}  // namespace distcomm
