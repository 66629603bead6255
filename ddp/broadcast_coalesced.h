// Broadcast of many tensors from one rank, packed into a few flat buffers per dtype: DDP
// uses it to start every replica from rank 0's parameters and buffers, with a handful of
// collectives instead of one per tensor.
#pragma once

#include <cstddef>
#include <vector>

#include "api/process_group.h"
#include "api/tensor.h"

namespace distcomm {
namespace ddp {

// Collective over pg: afterwards every rank's tensors hold root's values. Tensors are
// packed in list order into buffers of at least (about) cap_bytes each; a buffer that
// would hold one tensor only is skipped and the tensor broadcast in place.
void broadcast_coalesced(ProcessGroup& pg, const std::vector<Tensor*>& tensors, int root, size_t cap_bytes);

}  // namespace ddp
}  // namespace distcomm
