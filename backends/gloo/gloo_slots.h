// gloo slots and tags: where an op's messages meet, and what keeps mismatched ops apart.
//
// gloo matches a message with a receive by (peer, slot), and moves no byte before the
// receiver has posted that slot (its TCP pairs announce a send and wait for the matching
// "receive ready"). So when the slot carries what both sides must agree on, ranks that
// disagree never exchange data: their op waits (and the stall watch names the mismatch)
// instead of gloo aborting on its network thread (a message longer than the receive) or
// filling part of a tensor (a shorter one). gloo checks sizes only on arrival.
//
// Prefixes: gloo's collectives use 0x01-0x08 (gloo/types.h); distcomm's own transfers stay
// clear of them, so a p2p message or a reduce_scatter block is never taken for part of a
// gloo collective.
#pragma once

#include <cstddef>
#include <cstdint>

#include "api/dtype.h"

namespace distcomm {
namespace gloo {

constexpr uint8_t kReduceScatterSlotPrefix = 0x41;
constexpr uint8_t kPointToPointSlotPrefix = 0x42;
// Receives nobody ever sends to: InterruptibleContext::close_connections' and the connection
// watch's probes (a receive posted on a closed connection throws at once).
constexpr uint8_t kNeverSentSlotPrefix = 0x43;
constexpr uint8_t kAllToAllSlotPrefix = 0x44;
// A rank that closes the group with nothing in flight says so to each peer here, before
// its connections close (gloo_connection_watch.h).
constexpr uint8_t kGoodbyeSlotPrefix = 0x45;

// A 64-bit hash folded into gloo's 32-bit collective tag.
inline uint32_t fold_to_tag(uint64_t hash) { return static_cast<uint32_t>(hash ^ (hash >> 32)); }

// What a transfer's size says in the low 24 bits of its slot: the byte count and dtype
// exactly below 512 KiB (bit 23 clear), a hash of them above (bit 23 set; two sizes share
// one with chance 2^-23).
inline uint64_t size_bits(size_t bytes, DType dtype) {
  constexpr uint64_t kExactBelow = uint64_t{1} << 19;
  const auto type = static_cast<uint64_t>(dtype) & 0xf;
  if (bytes < kExactBelow) return (type << 19) | bytes;
  uint64_t h = (bytes * 0x9e3779b97f4a7c15ULL) ^ (type * 0xbf58476d1ce4e5b9ULL);
  h ^= h >> 29;
  return (uint64_t{1} << 23) | (h & ((uint64_t{1} << 23) - 1));
}

// A slot of distcomm's own: prefix (8 bits), a 32-bit key (a p2p tag, a collective's tag),
// and the transfer's size bits, so that a send and a receive of different sizes never meet.
inline uint64_t sized_slot(uint8_t prefix, uint32_t key, size_t bytes, DType dtype) {
  return (uint64_t{prefix} << 56) | (uint64_t{key} << 24) | size_bits(bytes, dtype);
}

}  // namespace gloo
}  // namespace distcomm
