// DistributedDataParallel: train one model on N ranks and get the result one rank would
// get on N times the batch.
//
// The model code stays the user's: DDP is given the parameters (name, value, gradient) and
// is told, during backward, as each gradient becomes final. A training step is
//
//   model.forward(...); loss ...;
//   model.backward(grad, [&](size_t i) { ddp.mark_grad_ready(i); });
//   ddp.finish_backward();   // gradients now hold the average over all ranks
//   optimizer.step();
//
// Gradients are packed into buckets (bucket_assignment.h) whose all_reduce starts as soon
// as the bucket is full, overlapping communication with the rest of backward (reducer.h).
// Every rank must construct DDP with the same parameters and run the same number of
// synchronised backward passes, or run its passes inside join() (uneven inputs).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "api/logging.h"
#include "api/process_group.h"
#include "api/tensor.h"
#include "ddp/bucket_assignment.h"
#include "ddp/comm_hooks.h"
#include "ddp/ddp_stats.h"

namespace distcomm {
namespace ddp {

class Reducer;

// A parameter and its gradient (same shape and dtype, host memory, floating point: as in
// PyTorch, where only floating-point tensors may require grad, since an averaged integer
// gradient truncates; integer state is a buffer). The Tensor objects belong to the caller
// and must outlive DDP; DDP reads `grad` when the parameter is marked ready and writes the
// averaged gradient back into it. A parameter used in two places (tied weights) is passed
// once, under one name: two parameters whose values or gradients share memory are refused.
struct NamedParameter {
  std::string name;
  Tensor* value = nullptr;
  Tensor* grad = nullptr;
};

// State that is not trained but must match across ranks (running statistics, ...).
struct NamedBuffer {
  std::string name;
  Tensor* value = nullptr;
};

// join()'s options, PyTorch's `model.join(...)` arguments.
struct JoinOptions {
  // true (PyTorch's default): every pass averages over the whole world, a joined rank adding
  // zeros. false: over the ranks still training in that pass (the join notice says which),
  // as PyTorch computes its "effective world size". Needs one of DDP's own comm hooks (a
  // hook of yours does its own dividing).
  bool divide_by_initial_world_size = true;
};

// Every rank must pass the same options, except gradient_as_bucket_view (where gradients
// live in this rank's memory): the others decide which collectives DDP issues, their sizes
// and order -- the buckets (the caps, rebuild_buckets), the usage flags
// (find_unused_parameters, comm_hook), the buffers' broadcast (broadcast_buffers) and the
// ordered logging (log_every_n with log_mode kOrdered, a collective; logging that is none, or
// not ordered, may differ between ranks). The constructor compares them
// in the round that compares the parameters, and a difference is an InvalidArgument on every
// rank naming the option, the values and the ranks holding each. Of comm_hook it compares
// the kind (allreduce_hook -- or none --, fp16_compress_hook, bf16_compress_hook, or one of
// the program's own): two hooks of the program's own cannot be told apart.
struct DdpOptions {
  // Bucket size cap; 0 gives one all_reduce per parameter.
  double bucket_cap_mb = 25;
  // Cap of the first bucket (the last layers' gradients), small so communication starts early.
  double first_bucket_cap_mb = 1;
  // Parameters may get no gradient in some backward passes, on some ranks (see
  // finish_backward). Without it, a parameter never marked ready is an error.
  bool find_unused_parameters = false;
  // The gradient tensors become views into the buckets (DDP reassigns *grad at
  // construction and when buckets are rebuilt): no copy in or out, less memory.
  bool gradient_as_bucket_view = false;
  // Re-broadcast the buffers from rank 0 after every synchronised backward pass (inside
  // join(), from the highest rank still training).
  bool broadcast_buffers = true;
  // Rebuild the buckets after the first iteration from the order gradients were marked.
  bool rebuild_buckets = true;
  CommHook comm_hook;  // empty: averaging all_reduce (allreduce_hook())
  // Log IterationStats every N synchronised iterations (0: never), in log_mode. kOrdered
  // prints every rank's line in rank order (a collective: all ranks log together).
  int log_every_n = 0;
  LogMode log_mode = LogMode::kOrdered;
};

class DistributedDataParallel {
 public:
  // Collective. Checks that every rank passes the same parameters and buffers (names,
  // dtypes, shapes, order) and the same options (DdpOptions) -- InvalidArgument on every
  // rank naming the differences and the ranks otherwise -- then copies rank 0's parameter
  // and buffer values to every rank.
  DistributedDataParallel(ProcessGroup& pg, std::vector<NamedParameter> parameters, DdpOptions options = {},
                          std::vector<NamedBuffer> buffers = {});
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  // The gradient of parameters[index] is final for this backward pass (call it from the
  // backward hook). May start a bucket's all_reduce.
  void mark_grad_ready(size_t index);
  void mark_grad_ready(const std::string& name);

  // Ends a backward pass: waits for the buckets and writes the averaged gradients back.
  // With find_unused_parameters, a parameter no rank marked keeps its gradient untouched,
  // and one marked on some ranks only gets the average with zeros from the others. Marked
  // means in this pass or in a no_sync() pass since the last synchronised one: what a rank
  // accumulated is averaged, as one process training on the whole batch would (PyTorch 1.13
  // looks at the synchronised pass only, and leaves such a gradient local). Without
  // it, a parameter some rank did not mark makes every rank throw Error naming it (never a
  // hang). Under no_sync() it only ends the pass (gradients stay local). Collective.
  void finish_backward();

  // While the guard lives, backward passes accumulate gradients locally; the next
  // synchronised pass reduces the accumulated sums. Enter and leave it between passes.
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(Reducer* reducer);
    NoSyncGuard(NoSyncGuard&& other) noexcept;
    NoSyncGuard& operator=(NoSyncGuard&&) = delete;
    ~NoSyncGuard();

   private:
    Reducer* reducer_;
    bool previous_;
  };
  [[nodiscard]] NoSyncGuard no_sync();

  // Uneven inputs (PyTorch's `with model.join():`). Every rank calls join() at the same
  // point, between backward passes, with its own training loop; the loops may run
  // different numbers of synchronised backward passes. Inside join, each synchronised pass
  // first all_reduces who is still training (one float32 per rank, issued before the first
  // bucket, a premul_sum by the join's number: a rank in another join() than the others
  // meets a Desync naming both, not their passes). Once `train` returns, this rank takes part in the others' remaining passes
  // with zero gradients, counted as produced (never as missing), so they average over the
  // whole world: a joined rank adds zeros, as PyTorch's default
  // (divide_by_initial_world_size; JoinOptions makes it the ranks still training); its own
  // gradient tensors are left as they were. An
  // error every rank raises alike in such a pass (a gradient one of them missed) is
  // theirs: this rank goes on; any other error there (the communication's, its comm
  // hook's) ends its join with that error. Buffers are broadcast from the highest rank still training. When every
  // rank's loop has ended, the parameters and buffers of the highest rank that trained
  // longest are copied to every rank, so all ranks end with one model. Collective; returns
  // the number of passes this rank ran for the others. Inside `train`, use the group for
  // DDP's passes only: an op of your own there has no partner on a rank that has joined
  // (the ranks then fail with a Desync naming both ops, or a Timeout). An exception from
  // `train` propagates at once, without waiting for the others; they learn of it when this
  // rank's group goes (PeerFailure), or at their op's timeout if the group lives on.
  size_t join(const std::function<void()>& train, const JoinOptions& options = {});

  // Replaces the comm hook (every rank must do the same, between backward passes; unlike
  // DdpOptions::comm_hook at construction, nothing compares it across ranks).
  void register_comm_hook(CommHook hook);
  // Copies rank 0's buffers to every rank now (collective). Inside join(), DDP calls it
  // after every pass (broadcast_buffers), from the highest rank still training; a call of
  // the program's own there is an op of its own (see join): a rank that has joined makes
  // no such call.
  void sync_buffers();

  const IterationStats& last_stats() const;
  std::vector<BucketSpec> buckets() const;
  size_t buckets_launched() const;  // in the backward pass under way
  size_t num_parameters() const { return parameters_.size(); }
  ProcessGroup& process_group() { return pg_; }

 private:
  // What follows every synchronised pass, this rank's or one it runs for the others in
  // join(): the buffers' broadcast and the log line.
  void after_synced_pass();

  ProcessGroup& pg_;
  std::vector<NamedParameter> parameters_;
  std::vector<NamedBuffer> buffers_;
  DdpOptions options_;
  std::unordered_map<std::string, size_t> index_of_;
  std::unique_ptr<Reducer> reducer_;
  bool joining_ = false;
  uint64_t joins_ = 0;  // join() calls so far: the notice's factor (Reducer::set_joining)
  // Inside join(): the highest rank still training in the last synchronised pass (-1 before
  // any), the root of the buffers' broadcast and, at the end, of the model's.
  int join_root_ = -1;
};

}  // namespace ddp
}  // namespace distcomm
