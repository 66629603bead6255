#include "integrations/torch/distributed_data_parallel.h"

#include <ATen/ops/zeros_like.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/nn/module.h>

#include <mutex>
#include <unordered_set>
#include <utility>

#include "api/errors.h"
#include "integrations/torch/tensor_bridge.h"

namespace distcomm {
namespace torch {

struct DistributedDataParallel::State : std::enable_shared_from_this<State> {
  enum class Phase { kIdle, kInBackward, kEndedByAutograd };

  ProcessGroup& pg;
  std::shared_ptr<::torch::nn::Module> module;
  DdpOptions options;
  std::vector<std::string> names;
  std::vector<at::Tensor> params;   // the leaves that require grad
  std::vector<Tensor> values;       // distcomm views of their data (broadcast at construction)
  // What the reducer reads gradients from and writes the averages into: a view of
  // param.grad(), refreshed whenever autograd may have given the parameter a new grad
  // tensor; with gradient_as_bucket_view the reducer points it into its bucket.
  std::vector<Tensor> grads;
  std::vector<at::Tensor> buffers;
  std::vector<Tensor> buffer_views;
  std::unique_ptr<ddp::DistributedDataParallel> ddp;
  std::vector<std::shared_ptr<::torch::autograd::Node>> accumulators;  // the graph holds them weakly
  std::vector<uintptr_t> hook_keys;
  std::vector<bool> marked;  // in the pass under way
  std::mutex mu;             // hooks of CUDA-free graphs run on the caller's thread, but be safe
  Phase phase = Phase::kIdle;

  State(ProcessGroup& group, std::shared_ptr<::torch::nn::Module> m, DdpOptions o)
      : pg(group), module(std::move(m)), options(std::move(o)) {}

  void on_grad_ready(size_t index);
  void finish_locked();
  void point_at(size_t index, const at::Tensor& grad);
  void give_torch_the_bucket_views();
};

namespace {

// Fires after AccumulateGrad has added this pass's gradient into param.grad().
class GradReadyHook : public ::torch::autograd::FunctionPostHook {
 public:
  GradReadyHook(std::weak_ptr<DistributedDataParallel::State> state, size_t index)
      : state_(std::move(state)), index_(index) {}
  ::torch::autograd::variable_list operator()(const ::torch::autograd::variable_list& outputs,
                                              const ::torch::autograd::variable_list& /*inputs*/) override {
    if (auto state = state_.lock()) state->on_grad_ready(index_);
    return outputs;
  }

 private:
  std::weak_ptr<DistributedDataParallel::State> state_;
  size_t index_;
};

}  // namespace

void DistributedDataParallel::State::point_at(size_t i, const at::Tensor& grad) {
  // Same memory (a bucket view, or the grad seen last time): keep the reducer's tensor.
  if (grads[i].defined() && grads[i].data() == grad.data_ptr()) return;
  try {
    grads[i] = as_tensor(grad);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument("DDP: the gradient of '" + names[i] + "': " + e.what());
  }
}

void DistributedDataParallel::State::on_grad_ready(size_t i) {
  std::lock_guard<std::mutex> lock(mu);
  if (phase != Phase::kInBackward) {
    phase = Phase::kInBackward;
    marked.assign(params.size(), false);
    if (options.finish_in_backward) {
      // Runs once the engine has executed the whole graph (every hook of this pass included).
      ::torch::autograd::Engine::get_default_engine().queue_callback([weak = weak_from_this()] {
        auto state = weak.lock();
        if (!state) return;
        std::lock_guard<std::mutex> lock(state->mu);
        if (state->phase != Phase::kInBackward) return;
        state->finish_locked();
        state->phase = Phase::kEndedByAutograd;
      });
    }
  }
  point_at(i, params[i].grad());
  marked[i] = true;
  ddp->mark_grad_ready(i);
}

void DistributedDataParallel::State::finish_locked() {
  if (marked.size() != params.size()) marked.assign(params.size(), false);
  // Gradients this pass did not produce: the reducer reads them (accumulated under
  // no_sync) or writes the average into them (used by another rank), so point it at the
  // current grad, creating a zero one where there is none -- undone below if no rank used it.
  std::vector<size_t> created;
  for (size_t i = 0; i < params.size(); ++i) {
    if (marked[i]) continue;
    if (!params[i].grad().defined()) {
      params[i].mutable_grad() = at::zeros_like(params[i]);
      created.push_back(i);
    }
    point_at(i, params[i].grad());
  }
  phase = Phase::kIdle;
  marked.assign(params.size(), false);
  const uint64_t synchronised_before = ddp->last_stats().iteration;
  try {
    ddp->finish_backward();
  } catch (...) {
    for (size_t i : created) params[i].mutable_grad() = at::Tensor();
    throw;
  }
  // Under no_sync() nothing was averaged; otherwise a parameter no rank used keeps no grad.
  const bool synchronised = ddp->last_stats().iteration != synchronised_before;
  const std::vector<size_t>& unused = ddp->last_stats().unused_parameters;
  const std::unordered_set<size_t> unused_set(unused.begin(), unused.end());
  for (size_t i : created) {
    if (!synchronised || unused_set.count(i)) params[i].mutable_grad() = at::Tensor();
  }
  // The first synchronised pass may rebuild the buckets, moving the views.
  if (options.gradient_as_bucket_view) give_torch_the_bucket_views();
}

void DistributedDataParallel::State::give_torch_the_bucket_views() {
  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor& grad = params[i].grad();
    if (!grad.defined() || grad.data_ptr() != grads[i].data()) params[i].mutable_grad() = from_tensor(grads[i]);
  }
}

DistributedDataParallel::DistributedDataParallel(ProcessGroup& pg, std::shared_ptr<::torch::nn::Module> module,
                                                 DdpOptions options)
    : state_(std::make_shared<State>(pg, std::move(module), std::move(options))) {
  State& s = *state_;
  if (!s.module) throw InvalidArgument("distcomm::torch::DistributedDataParallel: the module is a null pointer");
  std::unordered_set<const void*> seen;  // a parameter shared by two submodules counts once
  for (const auto& item : s.module->named_parameters(/*recurse=*/true)) {
    const at::Tensor& p = item.value();
    if (!p.requires_grad() || !seen.insert(p.unsafeGetTensorImpl()).second) continue;
    s.names.push_back(item.key());
    s.params.push_back(p);
  }
  const size_t n = s.params.size();
  // The reducer keeps pointers into these vectors: they are sized once, here.
  s.values.reserve(n);
  s.grads.resize(n);
  std::vector<ddp::NamedParameter> named;
  for (size_t i = 0; i < n; ++i) {
    s.values.push_back(as_tensor(s.params[i]));
    const at::Tensor& grad = s.params[i].grad();
    if (grad.defined()) {
      s.point_at(i, grad);
    } else if (s.options.gradient_as_bucket_view) {
      s.grads[i] = Tensor::zeros(s.values[i].shape(), s.values[i].dtype());  // moved into its bucket
    } else {
      // Never read or written: it only tells the reducer the gradient's shape until
      // autograd produces one (unused pages of a large allocation take no memory).
      s.grads[i] = Tensor::empty(s.values[i].shape(), s.values[i].dtype(), s.values[i].device());
    }
    named.push_back({s.names[i], &s.values[i], &s.grads[i]});
  }
  const auto named_buffers = s.module->named_buffers(/*recurse=*/true);
  s.buffer_views.reserve(named_buffers.size());
  std::vector<ddp::NamedBuffer> buffers;
  for (const auto& item : named_buffers) {
    if (!item.value().defined()) continue;  // registered empty: nothing to keep in step
    s.buffers.push_back(item.value());
    s.buffer_views.push_back(as_tensor(item.value()));
    buffers.push_back({item.key(), &s.buffer_views.back()});
  }
  s.ddp = std::make_unique<ddp::DistributedDataParallel>(pg, std::move(named), s.options, std::move(buffers));
  if (s.options.gradient_as_bucket_view) s.give_torch_the_bucket_views();

  for (size_t i = 0; i < n; ++i) {
    std::shared_ptr<::torch::autograd::Node> accumulator = ::torch::autograd::impl::grad_accumulator(s.params[i]);
    s.hook_keys.push_back(accumulator->add_post_hook(std::make_unique<GradReadyHook>(state_, i)));
    s.accumulators.push_back(std::move(accumulator));
  }
}

DistributedDataParallel::~DistributedDataParallel() {
  State& s = *state_;
  for (size_t i = 0; i < s.accumulators.size(); ++i) s.accumulators[i]->del_post_hook(s.hook_keys[i]);
}

void DistributedDataParallel::finish_backward() {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (state_->phase == State::Phase::kEndedByAutograd) {
    state_->phase = State::Phase::kIdle;
    return;
  }
  state_->finish_locked();
}

ddp::DistributedDataParallel::NoSyncGuard DistributedDataParallel::no_sync() { return state_->ddp->no_sync(); }
size_t DistributedDataParallel::join(const std::function<void()>& train) {
  // Not under the state's lock: `train` runs backward passes, whose hooks take it.
  return state_->ddp->join(train);
}
void DistributedDataParallel::register_comm_hook(ddp::CommHook hook) { state_->ddp->register_comm_hook(std::move(hook)); }
void DistributedDataParallel::sync_buffers() { state_->ddp->sync_buffers(); }
const ddp::IterationStats& DistributedDataParallel::last_stats() const { return state_->ddp->last_stats(); }
std::vector<ddp::BucketSpec> DistributedDataParallel::buckets() const { return state_->ddp->buckets(); }
size_t DistributedDataParallel::buckets_launched() const { return state_->ddp->buckets_launched(); }
std::vector<std::string> DistributedDataParallel::parameter_names() const { return state_->names; }
::torch::nn::Module& DistributedDataParallel::module() { return *state_->module; }
ProcessGroup& DistributedDataParallel::process_group() { return state_->pg; }

}  // namespace torch
}  // namespace distcomm
