// DistributedDataParallel for a torch::nn::Module: distcomm's DDP (ddp/: buckets, reducer,
// comm hooks, statistics), driven by autograd.
//
//   auto net = std::make_shared<Net>();
//   distcomm::torch::DistributedDataParallel ddp(*pg, net);  // checks, broadcasts rank 0's state
//   torch::optim::SGD opt(net->parameters(), 0.01);
//   for (...) {
//     opt.zero_grad();
//     loss_fn(net->forward(x), y).backward();  // buckets all_reduce during backward; at its end
//     opt.step();                              // the gradients hold the average over all ranks
//   }
//
// How it is driven: a post hook on each parameter's gradient accumulator (autograd's
// AccumulateGrad node) fires once the gradient of this backward pass has been added into
// param.grad(), so the gradient is final; the hook marks it ready and the reducer starts a
// bucket's all_reduce as soon as the bucket is full, while backward goes on. The first hook
// of a pass also queues a callback on autograd's engine that runs when the whole backward
// has finished and ends the pass (finish_backward): so the end is implicit, as in PyTorch.
// finish_backward() may still be called after backward (a no-op when autograd ended the
// pass); it is needed where a rank's backward may produce no gradient at all (then no hook
// fires and nothing is queued), and with finish_in_backward = false.
//
// Loading into the module after wrapping it (build, wrap, then torch::load to resume) works:
// torch::load set_()s each parameter to new storage, and autograd then gives it a new
// gradient accumulator at the next forward. A tensor hook on each parameter notices it when
// the gradient arrives, hooks the new accumulator for the next passes and marks this pass's
// gradient ready at its end (that pass's bucket reduction overlaps less); the views of the
// values and buffers (join's final copy, the buffers' broadcast) follow the new storage. A
// parameter or buffer whose shape or dtype changed makes DDP throw InvalidArgument naming it.
//
// Parameters are those of module->named_parameters() that require grad (a parameter shared
// by two submodules counts once, under its first name); buffers are named_buffers(). The
// frozen parameters (requires_grad false) are not reduced, but are checked across ranks
// (names, dtypes, shapes) and broadcast from rank 0 at construction, as in PyTorch. Every
// rank must build the same module (a parameter frozen on some ranks only is named as such).
// Host (CPU) tensors only: the reducer's buckets live in host memory. Dense gradients only:
// a sparse one (Embedding with sparse(true)) makes backward throw InvalidArgument naming
// the parameter. A strided parameter (transposed, channels_last) is moved through a
// contiguous copy of its value and of its gradient; its grad keeps its own layout.
// Gradients of parameters no rank used keep their state (an undefined grad stays
// undefined, also with gradient_as_bucket_view); a parameter unused on this rank but used
// elsewhere gets the average.
// gradient_as_bucket_view: param.grad() becomes a view into its bucket at construction and
// stays one while gradients are zeroed in place (torch::optim's zero_grad() in libtorch
// 1.13); a grad set to none is made anew by autograd, copied into the bucket when it is
// ready and replaced by the view (also for a strided parameter: its grad is then contiguous).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "api/process_group.h"
#include "ddp/distributed_data_parallel.h"

namespace torch {
namespace nn {
class Module;
}  // namespace nn
}  // namespace torch

namespace distcomm {
namespace torch {

struct DdpOptions : ddp::DdpOptions {
  // End each backward pass from autograd (see above). false: call finish_backward() after
  // every backward pass.
  bool finish_in_backward = true;
};

class DistributedDataParallel {
 public:
  // Collective: every rank's module must have the same parameters (frozen ones included,
  // frozen alike) and buffers (names, dtypes, shapes); otherwise every rank throws
  // InvalidArgument naming the differences. Then copies rank 0's parameters (frozen ones included) and buffers to
  // every rank.
  DistributedDataParallel(ProcessGroup& pg, std::shared_ptr<::torch::nn::Module> module, DdpOptions options = {});
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  // Ends the backward pass, unless autograd has already ended it (finish_in_backward):
  // waits for the buckets and writes the averaged gradients into param.grad(). Throws the
  // reducer's errors (a parameter without a gradient names it). Collective: call it once per
  // backward pass on every rank, or never when every rank's backward reaches a parameter.
  void finish_backward();

  // While the guard lives, backward passes accumulate gradients locally (gradient
  // accumulation); the next synchronised pass averages the sums.
  [[nodiscard]] ddp::DistributedDataParallel::NoSyncGuard no_sync();
  // Uneven inputs (PyTorch's `with model.join():`): ddp::DistributedDataParallel::join.
  // `train` runs this rank's loop (forward, backward, optimizer step); afterwards this rank
  // runs the others' remaining passes with zero gradients, and every rank ends with the
  // module of the rank that trained longest. Returns the passes run for the others.
  size_t join(const std::function<void()>& train);
  void register_comm_hook(ddp::CommHook hook);
  void sync_buffers();  // copies rank 0's buffers to every rank now (collective)

  const ddp::IterationStats& last_stats() const;
  std::vector<ddp::BucketSpec> buckets() const;
  size_t buckets_launched() const;  // in the backward pass under way
  // Index i here is parameter i in buckets() and IterationStats::unused_parameters.
  std::vector<std::string> parameter_names() const;
  ::torch::nn::Module& module();
  ProcessGroup& process_group();

  struct State;  // shared with the autograd hooks, which may outlive this object

 private:
  std::shared_ptr<State> state_;
};

}  // namespace torch
}  // namespace distcomm
