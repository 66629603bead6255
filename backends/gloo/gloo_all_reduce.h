// all_reduce algorithm choice for a gloo group: config["algorithm"].
#pragma once

#include <cstddef>
#include <string>

namespace distcomm {
namespace gloo_backend {

enum class AllReduceAlgorithm {
  kAuto,
  kRing,             // gloo::allreduce, ring: pipelined reduce-scatter + all-gather
  kRingChunked,      // gloo::AllreduceRingChunked
  kHalvingDoubling,  // gloo::AllreduceHalvingDoubling
  kBcube,            // gloo::allreduce, bcube (recursive halving/doubling on 2^k ranks)
};

// "auto", "ring", "ring_chunked", "halving_doubling", "bcube"; "" is auto.
// Throws InvalidArgument listing the names.
AllReduceAlgorithm parse_all_reduce_algorithm(const std::string& name);
const char* all_reduce_algorithm_name(AllReduceAlgorithm algorithm);

// The auto rule. Small messages are latency-bound: the time goes into rounds of messages,
// not bytes. bcube needs log2(P) rounds on a power-of-two group (one direct exchange per
// other factor), the ring 2(P-1) rounds of at least 2P segments. Both move 2(P-1)/P of the
// data per rank; the ring pipelines segments with the reduction, which pays only once the
// message is large. So auto picks bcube up to kAutoBcubeMaxBytes and the ring above.
// Measured here (loopback, 2 cores, float32 sum, best of 10-40): at 4 ranks bcube took
// 0.6-3.0 ms from 1 KiB to 1 MiB where the ring took 2.1-6.3 ms; at 4 MiB the ring was
// ahead (11.9 vs 12.7 ms); 2 ranks crossed over between 1 and 4 MiB too.
//
// Except the tiniest tensors: with fewer elements than the ring's 2P segments, gloo's ring
// skips the empty segments and sends fewer, smaller messages than bcube. Measured (tools/
// bench, mean of 100-200, 2 cores, float32 sum, worker_sched=batch, ring vs bcube): 2 ranks
// at 8 B (2 elements) 0.31-0.54 vs 0.49-0.67 ms, at 16 B bcube ahead again; 4 ranks at 8 and
// 16 B 0.91-1.0 vs 1.7-2.3 ms and 1.9-2.0 vs 2.2-2.4 ms, at 32 B (8 elements) bcube ahead
// (2.1-2.9 vs 3.0-3.4). With the default scheduling, 2 ranks at 8 B: median 0.25 vs 0.37 ms,
// 90th percentile 0.49 vs 3.2 ms.
// An explicit choice is always kept.
constexpr size_t kAutoBcubeMaxBytes = 1024 * 1024;
AllReduceAlgorithm resolve_all_reduce_algorithm(AllReduceAlgorithm configured, size_t count, size_t element_bytes,
                                                int group_size);

}  // namespace gloo_backend
}  // namespace distcomm
