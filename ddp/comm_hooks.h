// Communication hooks: how one bucket of gradients is reduced across ranks.
//
// A hook receives the bucket (a flat buffer holding this rank's gradients) and returns the
// Work of its communication at once; when that Work completes, the buffer must hold the
// average of every rank's gradients. DDP calls the hook as soon as a bucket is full, in
// bucket order, on every rank, so a hook must issue the same collectives on every rank and
// issue them before it returns. The default hook averages with one all_reduce.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "api/process_group.h"
#include "api/tensor.h"
#include "api/work.h"

namespace distcomm {
namespace ddp {

struct GradBucket {
  size_t index = 0;        // launch order, 0 first
  size_t num_buckets = 0;
  // Flat, one dtype: exactly the bucket's gradients (parameter_indices at offsets), nothing
  // else; gradients of locally unused parameters are zero. Which ranks produced which
  // gradients is DDP's own exchange, never in the buffer of a hook of yours, so a hook may
  // compress, sparsify or quantize the buffer: what it leaves there is what DDP writes back.
  Tensor buffer;
  std::vector<size_t> parameter_indices;  // which parameters, in buffer order
  std::vector<int64_t> offsets;           // element offset of each in buffer
  bool is_last() const { return index + 1 == num_buckets; }
};

using CommHook = std::function<WorkPtr(ProcessGroup& pg, GradBucket& bucket)>;

// all_reduce with ReduceOp::AVG (native in the backend, or SUM then a division).
CommHook allreduce_hook();

// Casts the bucket to float16 (bfloat16), divided by the world size first so the sum
// cannot overflow, all_reduces the half-size buffer with SUM and casts the result back:
// half the bytes on the wire for about 3 (float16) or 2 (bfloat16) significant digits.
// Buckets that are not float32/float64 are averaged uncompressed.
CommHook fp16_compress_hook();
CommHook bf16_compress_hook();

// Whether `hook` is one of the three above, as returned (not wrapped in a function of
// yours). DDP lets its own per-gradient flags ride in the last bucket through these, which
// average every element (ddp/reducer.h); with any other hook it exchanges them itself. So
// which collectives DDP issues depends on the hook: every rank must register the same one.
bool is_builtin_hook(const CommHook& hook);

// "allreduce_hook" (an empty hook too: DDP's default), "fp16_compress_hook",
// "bf16_compress_hook", or "a hook of the program's own" (two such hooks cannot be told
// apart): what DDP compares across ranks at construction.
std::string hook_name(const CommHook& hook);

// then(first, next): a Work that completes when `first` has and `next` has run after it
// (api/work.h), for hooks that post-process.
using distcomm::then;

}  // namespace ddp
}  // namespace distcomm
