// The shm backend's settings (BackendOptions::config keys, all optional).
//
//   shm_slot_bytes    staging per rank for one round of a collective (default 1 MiB).
//                     Larger messages go through in rounds of this size, so memory stays
//                     fixed whatever the message size.
//   shm_slots         rounds a rank may run ahead of its slowest peer (default 4, >= 2).
//   shm_small_bytes   all_reduce and reduce up to this size take the one-round path (every
//                     rank reduces everything); above it, reduce-scatter + all-gather
//                     (default 16 KiB).
//   shm_p2p_chunk_bytes, shm_p2p_depth
//                     each ordered pair of ranks has a ring of `depth` chunks of this size
//                     for send/recv (default 32 KiB x 4).
//   shm_spin_us, shm_yield_us
//                     how long a waiting rank spins, then yields, before it sleeps on a
//                     futex (defaults 20 and 200; spinning is skipped when the group has
//                     more ranks on this host than there are cores to run them).
//   shm_nap_us        how long an issued op may wait for a thread to wait on it before
//                     the group's progress thread runs it (default 1000).
//
// Keys that change the shared layout or the algorithm (the first five) must agree on every
// rank; group creation checks that and names the rank that differs.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <string>

namespace distcomm {
namespace shm {

struct ShmConfig {
  size_t slot_bytes = size_t{1} << 20;
  int slots = 4;
  size_t small_bytes = size_t{16} << 10;
  size_t p2p_chunk_bytes = size_t{32} << 10;
  int p2p_depth = 4;
  std::chrono::microseconds spin{20};
  std::chrono::microseconds yield{200};
  std::chrono::microseconds nap{1000};

  // The settings every rank must share, as text ("slot_bytes=1048576 slots=4 ...").
  std::string shared_signature() const;
};

// Reads the shm_* keys of a backend config; other keys are left to other backends.
// Throws InvalidArgument naming the key, its value and what is accepted.
ShmConfig parse_shm_config(const std::map<std::string, std::string>& config);

}  // namespace shm
}  // namespace distcomm
