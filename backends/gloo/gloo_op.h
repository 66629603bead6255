// What a gloo group's worker thread runs: one queued collective, and what it runs with.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include <gloo/context.h>

#include "api/backend.h"
#include "api/reduce_op.h"
#include "api/tensor.h"
#include "api/work.h"
#include "backends/gloo/gloo_all_reduce.h"
#include "backends/gloo/gloo_comm.h"

namespace distcomm {
namespace gloo_backend {

// One collective, as the Backend call described it. The Tensors are handles: holding them
// keeps owned storage alive until the op has run (views stay the caller's to keep alive).
struct GlooOp {
  OpType type = OpType::kBarrier;
  WorkPtr work;
  Tensor out;  // written: the result (the only tensor of in-place ops)
  Tensor in;   // read: the separate input, where the op has one
  ReduceOp reduce = ReduceOp::SUM;
  int root = 0;
  std::vector<int64_t> out_counts;  // all_to_all: elements from / to each rank
  std::vector<int64_t> in_counts;
  uint32_t tag = 0;  // gloo tag: collective_tag()
  std::chrono::milliseconds timeout{0};
};

// The gloo tag of a collective: its sequence number, unique among the group's ops in
// flight. The one place it is computed, so that what a tag carries can change here alone.
inline uint32_t collective_tag(const OpContext& ctx) { return static_cast<uint32_t>(ctx.seq); }

// Grow-only memory for ops that need room besides their tensors (reduce's non-root
// output, reduce_scatter's blocks in flight). Used by the worker thread only, so steady
// state allocates nothing.
class ScratchBuffer {
 public:
  void* get(size_t bytes) {
    if (bytes > size_) {
      data_.reset(new uint8_t[bytes]);
      size_ = bytes;
    }
    return data_.get();
  }

 private:
  std::unique_ptr<uint8_t[]> data_;
  size_t size_ = 0;
};

// What collectives run with: the group's connections and the worker's scratch memory.
struct CollectiveEnv {
  std::shared_ptr<GlooContext> context;
  AllReduceAlgorithm algorithm = AllReduceAlgorithm::kAuto;
  ScratchBuffer scratch;
};

// Runs op to completion on the calling (worker) thread; throws what gloo throws.
void run_collective(CollectiveEnv& env, GlooOp& op);
// The two that need more than one gloo call (gloo_all_reduce.cc, gloo_reduce_scatter.cc).
void run_all_reduce(CollectiveEnv& env, GlooOp& op);
void run_reduce_scatter(CollectiveEnv& env, GlooOp& op);

// The gloo element-type stand-in of a given size: gloo's typed setters only use sizeof(T),
// and reductions are passed separately, so four instantiations serve every dtype.
template <typename Fn>
void with_element_type(size_t element_bytes, Fn&& fn) {
  switch (element_bytes) {
    case 1: return fn(uint8_t{});
    case 2: return fn(uint16_t{});
    case 4: return fn(uint32_t{});
    default: return fn(uint64_t{});
  }
}

}  // namespace gloo_backend
}  // namespace distcomm
