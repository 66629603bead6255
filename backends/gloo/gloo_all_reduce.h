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
// not bytes. bcube needs log2(P) rounds on a power-of-two group (and one direct exchange
// round per odd factor otherwise), the ring 2(P-1). Large messages are bandwidth-bound:
// the ring sends each byte 2(P-1)/P times, the minimum, in pipelined segments. So auto
// picks bcube up to kAutoBcubeMaxBytes and the ring above. An explicit choice is kept.
constexpr size_t kAutoBcubeMaxBytes = 64 * 1024;
AllReduceAlgorithm resolve_all_reduce_algorithm(AllReduceAlgorithm configured, size_t bytes);

}  // namespace gloo_backend
}  // namespace distcomm
