// Host buffers for the list forms' packed copies (all_gather, gather, scatter,
// reduce_scatter, all_to_all of lists, all_reduce_coalesced), reused from op to op.
//
// A fresh buffer per op cost more than the op on hosts whose first touch of a page is
// expensive (a paravirtualised VM: ~20 us a page, 768 faults for 3 MiB): a 1 MiB-per-rank
// gather into separate tensors took 9.9 ms against 0.15 ms into views of one buffer
// (helper-69). A buffer goes back to the pool when the last Tensor over it goes (the op's
// and its unpacking step's copies, once the op has ended), so ops in flight at once each
// hold their own.
//
// What the pool keeps unused: up to 4 buffers of 256 MiB in all, plus the 2 most recently
// returned buffers above 256 MiB ("large ones", each the size of one list op's packed copy).
// A large one serves a take of more than half its size, and goes once 8 takes in a row
// were served without it or newer large ones replace it; a job whose last list op was a
// large one keeps it until the process ends.
#pragma once

#include <cstdint>

#include "api/dtype.h"
#include "api/tensor.h"

namespace distcomm {

// A host tensor of `numel` elements of `dtype`, uninitialised, over a buffer of the
// process's pool (Tensor::empty's errors when one must be allocated). Thread-safe.
Tensor pooled_tensor(int64_t numel, DType dtype);

// What the pool holds unused now, and how many tensors it gave out over how many buffers
// it had to allocate, since the process began (for tests). free_* count the buffers of up
// to 256 MiB, large_* those above it.
struct ScratchPoolUse {
  size_t free_buffers = 0;
  size_t free_bytes = 0;
  uint64_t taken = 0;
  uint64_t allocated = 0;
  size_t large_buffers = 0;
  size_t large_bytes = 0;
};
ScratchPoolUse scratch_pool_use();

}  // namespace distcomm
