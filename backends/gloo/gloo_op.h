// What a gloo group's worker thread runs: one queued collective, and what it runs with.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include <gloo/context.h>

#include "api/plugin/backend.h"
#include "api/plugin/plugin.h"
#include "api/reduce_op.h"
#include "api/tensor.h"
#include "api/work.h"
#include "backends/gloo/gloo_all_reduce.h"
#include "backends/gloo/gloo_comm.h"
#include "backends/gloo/gloo_slots.h"

namespace distcomm {
namespace gloo {

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
  std::chrono::milliseconds timeout{0};  // the op's own, as its errors name it
  // How long gloo's waits may take: the timeout, or later where the stall watch enforces
  // the timeout (GlooBackend::gloo_wait_limit).
  std::chrono::milliseconds wait_limit{0};
};

// The gloo tag of a collective: its fingerprint's agreement hash (op, sequence number,
// dtype, count, root, reduction; gloo_slots.h), so that ranks that disagree on any of them
// never exchange a byte, and ops in flight together (different sequence numbers) differ.
// From a core that fills no fingerprint (ABI minor < 3), the sequence number.
inline uint32_t collective_tag(const OpContext& ctx) {
  if (core_abi_minor() < 3) return static_cast<uint32_t>(ctx.seq);
  return fold_to_tag(ctx.fingerprint.agreement_hash());
}

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

// What collectives run with: the group's connections (and their watch, which names a peer
// that closed its connection) and the worker's scratch memory.
struct CollectiveEnv {
  std::shared_ptr<GlooContext> context;
  ConnectionWatch* connections = nullptr;  // null in a group of one
  AllReduceAlgorithm algorithm = AllReduceAlgorithm::kAuto;
  ScratchBuffer scratch;
};

// Runs op to completion on the calling (worker) thread; throws what gloo throws.
void run_collective(CollectiveEnv& env, GlooOp& op);
// The ones that need more than one gloo call (gloo_all_reduce.cc, gloo_reduce_scatter.cc,
// gloo_all_to_all.cc).
void run_all_reduce(CollectiveEnv& env, GlooOp& op);
void run_reduce_scatter(CollectiveEnv& env, GlooOp& op);
void run_all_to_all(CollectiveEnv& env, GlooOp& op);

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

}  // namespace gloo
}  // namespace distcomm
