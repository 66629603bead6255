// The collectives that map onto one gloo call each, and the dispatch of every collective.
//
// Shared conventions: a group of one never calls gloo (gloo's collectives need a peer
// connection even then); an op with no elements moves no data but still meets its peers
// (a barrier on its tag); tensors are flat and contiguous (the ProcessGroup packed list
// arguments), so gloo gets raw pointers.
#include <cstring>

#include <gloo/allgather.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/gather.h>
#include <gloo/reduce.h>
#include <gloo/scatter.h>

#include "api/errors.h"
#include "backends/gloo/gloo_op.h"
#include "backends/gloo/gloo_reduction.h"

namespace distcomm {
namespace gloo {
namespace {

// gloo's option classes take typed pointers; the type only sets the element size.
template <typename Options>
void set_output(Options& opts, const Tensor& t, size_t count) {
  with_element_type(element_size(t.dtype()), [&](auto zero) {
    using U = decltype(zero);
    opts.setOutput(static_cast<U*>(t.data()), count);
  });
}

template <typename Options>
void set_input(Options& opts, const Tensor& t, size_t count) {
  with_element_type(element_size(t.dtype()), [&](auto zero) {
    using U = decltype(zero);
    opts.setInput(static_cast<U*>(t.data()), count);  // gloo only reads inputs
  });
}

template <typename Options>
void set_tag_and_timeout(Options& opts, const GlooOp& op) {
  opts.setTag(op.tag);
  opts.setTimeout(op.wait_limit);
}

void copy_bytes(void* dst, const void* src, size_t bytes) {
  if (dst != src && bytes > 0) std::memmove(dst, src, bytes);
}

void run_broadcast(CollectiveEnv& env, GlooOp& op) {
  ::gloo::BroadcastOptions opts(env.context);
  set_output(opts, op.out, static_cast<size_t>(op.out.numel()));  // the root's is the input
  opts.setRoot(op.root);
  set_tag_and_timeout(opts, op);
  ::gloo::broadcast(opts);
}

void run_reduce(CollectiveEnv& env, GlooOp& op) {
  const auto count = static_cast<size_t>(op.out.numel());
  ::gloo::ReduceOptions opts(env.context);
  if (env.context->rank == op.root) {
    set_output(opts, op.out, count);  // in place: the root's tensor is input and result
  } else {
    // gloo writes partial sums into the output on every rank; non-root tensors must stay
    // as they were, so they are only read and the partial sums go to scratch.
    set_input(opts, op.out, count);
    Tensor partial = Tensor::from_blob(env.scratch.get(op.out.nbytes()), {op.out.numel()}, op.out.dtype());
    set_output(opts, partial, count);
  }
  opts.setRoot(op.root);
  opts.setReduceFunction(reduce_function(op.out.dtype(), op.reduce));
  set_tag_and_timeout(opts, op);
  ::gloo::reduce(opts);
}

void run_all_gather(CollectiveEnv& env, GlooOp& op) {
  const auto count = static_cast<size_t>(op.in.numel());
  const size_t size = static_cast<size_t>(env.context->size);
  ::gloo::AllgatherOptions opts(env.context);
  // In place (the input is already this rank's block of the output): gloo takes no input.
  const auto* own_block = static_cast<uint8_t*>(op.out.data()) + static_cast<size_t>(env.context->rank) * op.in.nbytes();
  if (op.in.data() != own_block) set_input(opts, op.in, count);
  set_output(opts, op.out, count * size);
  set_tag_and_timeout(opts, op);
  ::gloo::allgather(opts);
}

void run_gather(CollectiveEnv& env, GlooOp& op) {
  const auto count = static_cast<size_t>(op.in.numel());
  ::gloo::GatherOptions opts(env.context);
  set_input(opts, op.in, count);
  if (env.context->rank == op.root) set_output(opts, op.out, count * static_cast<size_t>(env.context->size));
  opts.setRoot(op.root);
  set_tag_and_timeout(opts, op);
  ::gloo::gather(opts);
}

void run_scatter(CollectiveEnv& env, GlooOp& op) {
  const auto count = static_cast<size_t>(op.out.numel());
  ::gloo::ScatterOptions opts(env.context);
  with_element_type(element_size(op.out.dtype()), [&](auto zero) {
    using U = decltype(zero);
    if (env.context->rank == op.root) {
      std::vector<U*> blocks(static_cast<size_t>(env.context->size));
      for (size_t r = 0; r < blocks.size(); ++r) blocks[r] = static_cast<U*>(op.in.data()) + r * count;
      opts.setInputs(blocks, count);
    }
    opts.setOutput(static_cast<U*>(op.out.data()), count);
  });
  opts.setRoot(op.root);
  set_tag_and_timeout(opts, op);
  ::gloo::scatter(opts);
}

void run_barrier(CollectiveEnv& env, GlooOp& op) {
  ::gloo::BarrierOptions opts(env.context);
  set_tag_and_timeout(opts, op);
  ::gloo::barrier(opts);
}

// A group of one: each op is a local copy, or nothing.
void run_alone(GlooOp& op) {
  switch (op.type) {
    case OpType::kAllGather:
    case OpType::kGather:
    case OpType::kScatter:
    case OpType::kReduceScatter:
    case OpType::kAllToAll:
      copy_bytes(op.out.data(), op.in.data(), op.out.nbytes());
      return;
    default:
      return;  // all_reduce, broadcast, reduce, barrier: the tensor is already the result
  }
}

// Whether this rank's op has no data to move: its count is 0, and so, where the ranks
// agree (the tag carries the count), every rank's. all_to_all never: its count is this
// rank's alone, and run_all_to_all meets each peer with a one-byte message where a pair
// has nothing.
bool moves_nothing(const GlooOp& op) {
  switch (op.type) {
    case OpType::kBarrier:
    case OpType::kAllToAll: return false;
    case OpType::kAllGather:
    case OpType::kGather: return op.in.numel() == 0;
    default: return op.out.numel() == 0;
  }
}

}  // namespace

void run_collective(CollectiveEnv& env, GlooOp& op) {
  if (env.context->size == 1) return run_alone(op);
  env.context->set_transport_timeout(op.wait_limit);
  // No data, but still a meeting on the op's tag: every rank that agrees takes this path
  // too, while a rank whose op differs (a non-empty tensor, another op) waits in another
  // slot with the others, and the stall watch names the disagreement (a Desync). Returning
  // here would let this rank go on, and leave the others to wait out the timeout.
  if (moves_nothing(op)) return run_barrier(env, op);
  switch (op.type) {
    case OpType::kAllReduce: return run_all_reduce(env, op);
    case OpType::kBroadcast: return run_broadcast(env, op);
    case OpType::kReduce: return run_reduce(env, op);
    case OpType::kAllGather: return run_all_gather(env, op);
    case OpType::kGather: return run_gather(env, op);
    case OpType::kScatter: return run_scatter(env, op);
    case OpType::kReduceScatter: return run_reduce_scatter(env, op);
    case OpType::kAllToAll: return run_all_to_all(env, op);
    case OpType::kBarrier: return run_barrier(env, op);
    default: throw InvalidArgument(std::string("gloo worker: ") + op_type_name(op.type) + " is not a collective");
  }
}

}  // namespace gloo
}  // namespace distcomm
