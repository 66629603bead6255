#include "backends/shm/shm_config.h"

#include "api/plugin/config_reader.h"

namespace distcomm {
namespace shm {

const distcomm_config_key kConfigKeys[] = {
    {"shm_slot_bytes", "1048576", nullptr,
     "staging per rank for one round of a collective; larger messages go through in rounds of this size, so "
     "the slots stay fixed whatever the message size; the list forms add a packed copy of the list "
     "(docs/backends.md) (same on every rank)"},
    {"shm_slots", "4", nullptr, "rounds a rank may run ahead of its slowest peer, 2 to 64 (same on every rank)"},
    {"shm_small_bytes", "16384", nullptr,
     "all_reduce and reduce up to this size take one round in which every rank reduces everything; above it, a "
     "pipelined reduce-scatter + all-gather (same on every rank)"},
    {"shm_p2p_chunk_bytes", "32768", nullptr,
     "send/recv: bytes per chunk of the ring between two ranks (same on every rank)"},
    {"shm_p2p_depth", "4", nullptr, "send/recv: chunks per ring (same on every rank)"},
    {"shm_spin_us", "20", nullptr,
     "how long a waiting rank spins before it yields; no spinning unless the group's ranks may run on a CPU each "
     "(the union of their affinity masks) and the host has a CPU per rank it runs, within its cgroup CPU quota "
     "(docs/shm.md)"},
    {"shm_yield_us", "200", nullptr,
     "how long a waiting rank then yields its core before it sleeps on a futex; unset, none where the cgroup CPU "
     "quota alone (not the cores) leaves fewer CPUs than ranks, since sched_yield on a free core uses the quota as "
     "a spin would"},
    {"shm_nap_us", "1000", nullptr,
     "how long an op nobody waits on may wait before the group's progress thread runs it"},
    {"shm_first_round", "0", nullptr,
     "for tests: the number of a group's first collective round, to run rounds across 2^32 without 2^32 ops (same "
     "on every rank)"},
    {nullptr, nullptr, nullptr, nullptr},
};

std::string ShmConfig::shared_signature() const {
  return "slot_bytes=" + std::to_string(slot_bytes) + " slots=" + std::to_string(slots) +
         " small_bytes=" + std::to_string(small_bytes) + " p2p_chunk_bytes=" + std::to_string(p2p_chunk_bytes) +
         " p2p_depth=" + std::to_string(p2p_depth) + " first_round=" + std::to_string(first_round);
}

ShmConfig parse_shm_config(const std::map<std::string, std::string>& config) {
  ShmConfig c;
  const ConfigReader r(config, "shm");
  constexpr long long kMiB = 1 << 20;
  // Slots hold whole 128-byte lines per rank, so the smallest is small but not absurd.
  c.slot_bytes =
      static_cast<size_t>(r.integer("shm_slot_bytes", static_cast<long long>(c.slot_bytes), 4096, 1024 * kMiB));
  c.slots = static_cast<int>(r.integer("shm_slots", c.slots, 2, 64));
  c.small_bytes =
      static_cast<size_t>(r.integer("shm_small_bytes", static_cast<long long>(c.small_bytes), 0, 1024 * kMiB));
  c.p2p_chunk_bytes = static_cast<size_t>(
      r.integer("shm_p2p_chunk_bytes", static_cast<long long>(c.p2p_chunk_bytes), 128, 256 * kMiB));
  c.p2p_depth = static_cast<int>(r.integer("shm_p2p_depth", c.p2p_depth, 1, 1024));
  c.first_round = static_cast<uint64_t>(r.integer("shm_first_round", 0, 0, 1LL << 62));
  c.spin = std::chrono::microseconds(r.integer("shm_spin_us", c.spin.count(), 0, 10000000));
  c.yield = std::chrono::microseconds(r.integer("shm_yield_us", c.yield.count(), 0, 10000000));
  c.yield_set = r.find("shm_yield_us") != nullptr;
  c.nap = std::chrono::microseconds(r.integer("shm_nap_us", c.nap.count(), 10, 10000000));
  c.local_world_size = static_cast<int>(r.integer("local_world_size", 0, 0, 1 << 30));
  return c;
}

}  // namespace shm
}  // namespace distcomm
