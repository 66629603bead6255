// The all_reduce algorithm names and the auto rule (gloo_all_reduce.h). No gloo here, so
// that the rule is unit-tested on its own.
#include "backends/gloo/gloo_all_reduce.h"

namespace distcomm {
namespace gloo {

const char* all_reduce_algorithm_name(AllReduceAlgorithm algorithm) {
  switch (algorithm) {
    case AllReduceAlgorithm::kAuto: return "auto";
    case AllReduceAlgorithm::kRing: return "ring";
    case AllReduceAlgorithm::kRingChunked: return "ring_chunked";
    case AllReduceAlgorithm::kHalvingDoubling: return "halving_doubling";
    case AllReduceAlgorithm::kBcube: return "bcube";
  }
  return "?";
}

AllReduceAlgorithm resolve_all_reduce_algorithm(AllReduceAlgorithm configured, size_t count, size_t element_bytes,
                                                int group_size) {
  if (configured != AllReduceAlgorithm::kAuto) return configured;
  // Fewer elements than the ring's 2P segments: the ring sends only the non-empty ones.
  if (count < 2 * static_cast<size_t>(group_size)) return AllReduceAlgorithm::kRing;
  return count * element_bytes <= auto_bcube_max_bytes(group_size) ? AllReduceAlgorithm::kBcube
                                                                     : AllReduceAlgorithm::kRing;
}

}  // namespace gloo
}  // namespace distcomm
