// all_reduce algorithm choice for a gloo group: config["algorithm"].
#pragma once

#include <cstddef>
#include <string>

namespace distcomm {
namespace gloo {

enum class AllReduceAlgorithm {
  kAuto,
  kRing,             // gloo::allreduce, ring: pipelined reduce-scatter + all-gather
  kRingChunked,      // gloo::AllreduceRingChunked
  kHalvingDoubling,  // gloo::AllreduceHalvingDoubling
  kBcube,            // gloo::allreduce, bcube (recursive halving/doubling on 2^k ranks)
};

// "auto", "ring", "ring_chunked", "halving_doubling", "bcube": the names GlooConfig reads.
const char* all_reduce_algorithm_name(AllReduceAlgorithm algorithm);

// The auto rule, against gloo's default (the ring). Small messages are latency-bound: the
// time goes into rounds of messages, not bytes. bcube needs log2(P) rounds on a
// power-of-two group (one direct exchange per other factor), the ring 2(P-1) rounds of at
// least 2P segments. Both move 2(P-1)/P of the data per rank; the ring pipelines segments
// with the reduction, which pays once the message is large. So auto picks bcube up to
// auto_bcube_max_bytes(P) and the ring above. Measured through distcomm (2 vCPUs, loopback,
// float32 sum, separate jobs, median of 5 alternating rounds, ratio = gloo's ring time /
// distcomm's): 2 ranks bcube 1.38 at 64 KiB, 1.33 at 256 KiB, 1.15 at 512 KiB, 0.91 at 1 MiB
// (ring 0.94), 0.78 at 2 MiB; 3 ranks bcube 1.31 at 512 KiB, 1.27 at 1 MiB, 1.17 at 2 MiB;
// 4 ranks 1.37, 1.23 and 0.99.
//
// Except the tiniest tensors: with fewer elements than the ring's 2P segments, gloo's ring
// skips the empty segments and sends fewer, smaller messages than bcube (gloo alone, 3 and 4
// ranks at 8 B: bcube 0.81 and 0.78 of the ring; 2 ranks a tie).
// An explicit choice is always kept.
constexpr size_t kAutoBcubeMaxBytes = 1024 * 1024;
constexpr size_t kAutoBcubeMaxBytesTwoRanks = 512 * 1024;
inline size_t auto_bcube_max_bytes(int group_size) {
  return group_size == 2 ? kAutoBcubeMaxBytesTwoRanks : kAutoBcubeMaxBytes;
}
AllReduceAlgorithm resolve_all_reduce_algorithm(AllReduceAlgorithm configured, size_t count, size_t element_bytes,
                                                int group_size);

}  // namespace gloo
}  // namespace distcomm
