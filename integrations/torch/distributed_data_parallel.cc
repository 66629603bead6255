#include "integrations/torch/distributed_data_parallel.h"

#include <ATen/core/grad_mode.h>
#include <ATen/ops/zeros_like.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <mutex>
#include <sstream>
#include <unordered_set>
#include <utility>

#include "api/errors.h"
#include "ddp/broadcast_coalesced.h"
#include "ddp/message_format.h"
#include "ddp/replica_check.h"
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
  // distcomm views of their data (broadcast at construction; join's final copy writes them):
  // refreshed (refresh_views_locked) where an op such as torch::load's set_ gave the
  // parameter new storage.
  std::vector<Tensor> values;
  // What the reducer reads gradients from and writes the averages into: a view of
  // param.grad(), refreshed whenever autograd may have given the parameter a new grad
  // tensor; with gradient_as_bucket_view the reducer points it into its bucket.
  std::vector<Tensor> grads;
  // A parameter or gradient that is not one dense block (a transposed weight, channels_last):
  // distcomm moves one dense block, so `values` / `grads` view a contiguous copy of it, kept
  // here (undefined for the contiguous ones) and copied back where DDP wrote it.
  std::vector<at::Tensor> value_copies;
  std::vector<at::Tensor> grad_copies;
  // gradient_as_bucket_view: each gradient's place in its bucket, as the reducer last
  // assigned it (at construction, and when it rebuilds the buckets). A grad autograd makes
  // anew (the last one was set to none) is moved there when it is ready.
  std::vector<Tensor> bucket_views;
  std::vector<at::Tensor> buffers;
  std::vector<std::string> buffer_names;
  std::vector<Tensor> buffer_views;  // what the buffers' broadcasts write: refreshed as values
  std::unique_ptr<ddp::DistributedDataParallel> ddp;
  // The gradient accumulator (AccumulateGrad) carrying each parameter's GradReadyHook. The
  // parameter holds it weakly: this keeps it, so the graphs of later forwards use it.
  // set_() and resize_() (torch::load does set_) make autograd drop it and give the
  // parameter a new one at the next forward: the tensor hook of each parameter
  // (follow_accumulator) then moves the GradReadyHook onto the new one.
  std::vector<std::shared_ptr<::torch::autograd::Node>> accumulators;
  std::vector<uintptr_t> hook_keys;
  std::vector<unsigned> tensor_hook_ids;
  std::vector<bool> marked;  // in the pass under way
  // In the pass under way: the gradient reached a new accumulator, hooked only now
  // (follow_accumulator); the engine had already read its post hooks, so the pass's end
  // marks it ready (finish_locked), once AccumulateGrad has added the gradient.
  std::vector<bool> pending;
  std::mutex mu;             // hooks of CUDA-free graphs run on the caller's thread, but be safe
  Phase phase = Phase::kIdle;

  State(ProcessGroup& group, std::shared_ptr<::torch::nn::Module> m, DdpOptions o)
      : pg(group), module(std::move(m)), options(std::move(o)) {}

  void on_grad_ready(size_t index);
  void begin_pass_locked();
  void finish_locked();
  void point_at(size_t index, const at::Tensor& grad);
  void adopt_bucket_view(size_t index);
  void give_torch_the_bucket_views(bool undefined_too);
  void note_bucket_moves(const std::vector<void*>& before);
  void copy_back_values_locked();
  void hook_accumulator(size_t index, std::shared_ptr<::torch::autograd::Node> accumulator);
  void follow_accumulator(size_t index);
  void refresh_views_locked();
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

// A parameter that requires grad on some ranks and is frozen on others: to the entries it is
// only a tensor missing ("no tensor on rank 0"), so it is named here, from the flags every
// rank sent in the frozen parameters' replica round. Every rank lists every parameter in
// named_parameters order, so the ranks are compared by position: O(parameters x ranks), no
// search by name. Past the first position where the names differ, the parameter lists
// differ and the entries (frozen ones here, the others in the core's round) say how.
std::string requires_grad_mismatch(const std::vector<ddp::ReplicaDescription>& ranks) {
  constexpr size_t kMaxNamed = 5;
  size_t shortest = ranks.empty() ? 0 : ranks[0].flags.size();
  for (const auto& d : ranks) shortest = std::min(shortest, d.flags.size());
  std::string problems;
  size_t differing = 0;
  for (size_t i = 0; i < shortest; ++i) {
    const std::string& name = ranks[0].flag_names[i];
    std::vector<int> trainable, frozen;
    bool same_name = true;
    for (size_t r = 0; r < ranks.size() && same_name; ++r) {
      same_name = ranks[r].flag_names[i] == name;
      (ranks[r].flags[i] == '1' ? trainable : frozen).push_back(static_cast<int>(r));
    }
    if (!same_name) break;
    if (trainable.empty() || frozen.empty()) continue;
    if (differing++ < kMaxNamed) {
      problems += (problems.empty() ? "" : "; ") + ("'" + name + "' requires grad on ") + ddp::rank_list(trainable) +
                  ", frozen (requires_grad false) on " + ddp::rank_list(frozen);
    }
  }
  if (problems.empty()) return problems;
  if (differing > kMaxNamed) problems += "; and " + std::to_string(differing - kMaxNamed) + " more";
  return "parameter " + problems +
         ". Every rank must freeze the same parameters: set requires_grad alike on every rank before wrapping the "
         "module";
}

// The frozen parameters (requires_grad false): the core reduces, checks and broadcasts only
// the others, so these are checked here and broadcast from rank 0 (broadcast_frozen), as
// PyTorch's DDP does (_verify_param_shape_across_processes, _sync_module_states).
struct FrozenParameters {
  std::vector<at::Tensor> tensors;
  std::vector<at::Tensor> contiguous;  // what the broadcast writes; copied back if not the same
  std::vector<Tensor> views;
};

// One host exchange: the frozen parameters' descriptions, with every parameter's
// requires_grad flag riding in the same message (requires_grad_mismatch reads them).
// Collective: every rank takes part, with or without frozen parameters; InvalidArgument on
// every rank alike.
FrozenParameters check_frozen_parameters(ProcessGroup& pg, const std::vector<std::string>& all_names,
                                         const std::vector<bool>& requires_grad,
                                         const std::vector<at::Tensor>& all_params) {
  FrozenParameters out;
  ddp::ReplicaDescription mine;
  mine.flag_names = all_names;
  std::string problems;
  for (size_t i = 0; i < all_params.size(); ++i) {
    mine.flags += requires_grad[i] ? '1' : '0';
    if (requires_grad[i]) continue;
    const at::Tensor& p = all_params[i];
    const std::string what = "frozen parameter '" + all_names[i] + "' (requires_grad false)";
    try {
      if (!p.is_cpu()) {
        throw InvalidArgument("is on " + p.device().str() +
                              "; DDP keeps its buckets in host memory and supports host tensors only");
      }
      at::Tensor dense = p.contiguous();
      Tensor view = as_tensor(dense);
      out.tensors.push_back(p);
      out.contiguous.push_back(std::move(dense));
      out.views.push_back(std::move(view));
    } catch (const InvalidArgument& e) {
      problems += (problems.empty() ? "" : "; ") + what + ": " + e.what();
      continue;
    }
    mine.entries.push_back(what + " " + out.views.back().describe());
  }
  mine.local_problems = problems;
  if (!problems.empty()) mine.entries.clear();
  ddp::verify_replicas(pg, mine, requires_grad_mismatch);
  return out;
}

// Rank 0's values into every rank's frozen parameters. Collective (nothing to do, on every
// rank alike, when no parameter is frozen: the replica round made the lists agree).
void broadcast_frozen(ProcessGroup& pg, FrozenParameters& frozen) {
  if (frozen.views.empty()) return;
  std::vector<Tensor*> pointers;
  for (Tensor& v : frozen.views) pointers.push_back(&v);
  ddp::broadcast_coalesced(pg, pointers, /*root=*/0, /*cap_bytes=*/64u << 20);
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < frozen.tensors.size(); ++i) {
    if (!frozen.contiguous[i].is_same(frozen.tensors[i])) frozen.tensors[i].copy_(frozen.contiguous[i]);
  }
}

}  // namespace

void DistributedDataParallel::State::point_at(size_t i, const at::Tensor& grad) {
  if (grad.layout() != c10::kStrided) {
    // Checked here, not left to as_tensor: a sparse tensor has no data pointer to compare.
    std::ostringstream layout;
    layout << grad.layout();
    throw InvalidArgument("DDP: the gradient of '" + names[i] + "' is sparse (layout " + layout.str() +
                          "): distcomm's DDP reduces dense gradients only (PyTorch's also reduces sparse "
                          "ones). Give the layer dense gradients (torch::nn::EmbeddingOptions(...).sparse(false), "
                          "the default; the same for EmbeddingBag), or reduce this gradient yourself");
  }
  at::Tensor dense = grad;
  if (!grad.is_contiguous()) {
    // The reducer reads and writes the copy; finish_locked copies the average back into
    // grad, which keeps its own layout (the parameter's, as autograd makes it).
    at::NoGradGuard no_grad;
    at::Tensor& copy = grad_copies[i];
    if (copy.defined() && copy.sizes() == grad.sizes() && copy.scalar_type() == grad.scalar_type()) {
      copy.copy_(grad);
    } else {
      copy = grad.contiguous();
    }
    dense = copy;
  } else {
    grad_copies[i] = at::Tensor();
  }
  // Same memory (a bucket view, or the grad seen last time): keep the reducer's tensor.
  if (grads[i].defined() && grads[i].data() == dense.data_ptr()) return;
  Tensor view;
  try {
    view = as_tensor(dense);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument("DDP: the gradient of '" + names[i] + "': " + e.what());
  }
  // The buckets were laid out for the parameter as it was at construction.
  if (grads[i].defined() && (view.shape() != grads[i].shape() || view.dtype() != grads[i].dtype())) {
    throw InvalidArgument("DDP: the gradient of '" + names[i] + "' is " + view.describe() + ", but DDP was built for " +
                          grads[i].describe() + ": the parameter changed shape or dtype after DDP was built "
                          "(set_, resize_, torch::load of another model); build DDP after changing it");
  }
  grads[i] = std::move(view);
}

// gradient_as_bucket_view: a grad that is not its bucket view (autograd made it because the
// last one was set to none, or the program assigned one) goes into the bucket, and torch
// gets the view back, as at construction; the reducer then reads it in place.
void DistributedDataParallel::State::adopt_bucket_view(size_t i) {
  if (!options.gradient_as_bucket_view || !bucket_views[i].defined()) return;
  const at::Tensor grad = params[i].grad();
  if (!grad.defined() || grad.data_ptr() == bucket_views[i].data()) return;
  at::NoGradGuard no_grad;
  at::Tensor view = from_tensor(bucket_views[i]);
  view.copy_(grad);  // any layout: the view is contiguous, the grad may not be
  params[i].mutable_grad() = view;
  grads[i] = bucket_views[i];
  grad_copies[i] = at::Tensor();
}

// The reducer reassigns every gradient tensor to its new bucket view when it rebuilds the
// buckets: a grads[i] that moved during a call of the core is such a view.
void DistributedDataParallel::State::note_bucket_moves(const std::vector<void*>& before) {
  if (!options.gradient_as_bucket_view) return;
  for (size_t i = 0; i < params.size(); ++i) {
    if (grads[i].data() != before[i]) bucket_views[i] = grads[i];
  }
}

// Where the core wrote `values` (the broadcast at construction, join's final copy), a
// parameter viewed through a contiguous copy gets the copy's content.
void DistributedDataParallel::State::copy_back_values_locked() {
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < params.size(); ++i) {
    if (value_copies[i].defined()) params[i].copy_(value_copies[i]);
  }
}

void DistributedDataParallel::State::hook_accumulator(size_t i, std::shared_ptr<::torch::autograd::Node> accumulator) {
  hook_keys[i] = accumulator->add_post_hook(std::make_unique<GradReadyHook>(weak_from_this(), i));
  accumulators[i] = std::move(accumulator);
}

// Runs in AccumulateGrad::apply (a tensor hook of a leaf), before the gradient is added.
// The engine decided before apply whether the node has post hooks to run: a GradReadyHook
// added here fires from the next pass on, and this pass's end marks the gradient ready.
void DistributedDataParallel::State::follow_accumulator(size_t i) {
  std::lock_guard<std::mutex> lock(mu);
  // Null: the accumulator was dropped and none made since; the node running is then one of
  // a graph recorded before (the old one, hooked).
  std::shared_ptr<::torch::autograd::Node> current = ::torch::autograd::impl::try_get_grad_accumulator(params[i]);
  if (!current || current == accumulators[i]) return;
  // The old one keeps its hook (it may still run in a graph recorded before; it goes with
  // that graph); only the current one is ours to keep alive.
  hook_accumulator(i, std::move(current));
  begin_pass_locked();
  pending[i] = true;
}

void DistributedDataParallel::State::refresh_views_locked() {
  auto refresh = [](const at::Tensor& t, Tensor& view, const std::string& what) {
    if (view.defined() && view.data() == t.data_ptr() && at::IntArrayRef(view.shape()) == t.sizes()) return;
    Tensor fresh;
    try {
      fresh = as_tensor(t);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument("DDP: " + what + ": " + e.what());
    }
    // Undefined: the first view, made at construction.
    if (view.defined() && (fresh.shape() != view.shape() || fresh.dtype() != view.dtype())) {
      throw InvalidArgument("DDP: " + what + " is " + fresh.describe() + ", but DDP was built with " + view.describe() +
                            ": it changed shape or dtype after DDP was built (set_, resize_, torch::load of another "
                            "model); build DDP after changing it");
    }
    view = std::move(fresh);  // the same Tensor object: the core keeps pointers to it
  };
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor& p = params[i];
    at::Tensor& copy = value_copies[i];
    if (p.layout() == c10::kStrided && !p.is_contiguous()) {
      // values[i] views a contiguous copy: bring it up to date (the core may read it next).
      if (copy.defined() && copy.sizes() == p.sizes() && copy.scalar_type() == p.scalar_type()) {
        copy.copy_(p);
      } else {
        copy = p.contiguous();
      }
      refresh(copy, values[i], "parameter '" + names[i] + "'");
    } else {
      copy = at::Tensor();
      refresh(p, values[i], "parameter '" + names[i] + "'");
    }
  }
  for (size_t i = 0; i < buffers.size(); ++i) refresh(buffers[i], buffer_views[i], "buffer '" + buffer_names[i] + "'");
}

void DistributedDataParallel::State::on_grad_ready(size_t i) {
  std::lock_guard<std::mutex> lock(mu);
  begin_pass_locked();
  pending[i] = false;  // the new accumulator had post hooks already: ours ran after all
  point_at(i, params[i].grad());
  adopt_bucket_view(i);
  marked[i] = true;
  ddp->mark_grad_ready(i);
}

void DistributedDataParallel::State::begin_pass_locked() {
  if (phase != Phase::kInBackward) {
    phase = Phase::kInBackward;
    marked.assign(params.size(), false);
    pending.assign(params.size(), false);
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
}

void DistributedDataParallel::State::finish_locked() {
  if (marked.size() != params.size()) marked.assign(params.size(), false);
  if (pending.size() != params.size()) pending.assign(params.size(), false);
  // Gradients that reached an accumulator hooked during this pass are in param.grad() now.
  for (size_t i = 0; i < params.size(); ++i) {
    if (!pending[i] || marked[i]) continue;
    pending[i] = false;
    point_at(i, params[i].grad());
    adopt_bucket_view(i);
    marked[i] = true;
    ddp->mark_grad_ready(i);
  }
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
  pending.assign(params.size(), false);
  try {
    refresh_views_locked();  // the buffers' broadcast after the pass writes buffer_views
  } catch (...) {
    for (size_t i : created) params[i].mutable_grad() = at::Tensor();
    throw;
  }
  const uint64_t synchronised_before = ddp->last_stats().iteration;
  std::vector<void*> before(params.size());
  for (size_t i = 0; i < params.size(); ++i) before[i] = grads[i].data();
  try {
    ddp->finish_backward();
  } catch (...) {
    for (size_t i : created) params[i].mutable_grad() = at::Tensor();
    throw;
  }
  note_bucket_moves(before);
  {
    // The averages the reducer wrote into the contiguous copies of strided gradients.
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < params.size(); ++i) {
      if (grad_copies[i].defined() && params[i].grad().defined()) params[i].mutable_grad().copy_(grad_copies[i]);
    }
  }
  // Under no_sync() nothing was averaged; otherwise a parameter no rank used keeps no grad.
  const bool synchronised = ddp->last_stats().iteration != synchronised_before;
  const std::vector<size_t>& unused = ddp->last_stats().unused_parameters;
  const std::unordered_set<size_t> unused_set(unused.begin(), unused.end());
  for (size_t i : created) {
    if (!synchronised || unused_set.count(i)) params[i].mutable_grad() = at::Tensor();
  }
  // The first synchronised pass may rebuild the buckets, moving the views. A grad left
  // undefined (no rank used the parameter) stays so: an optimizer with momentum would
  // otherwise go on moving the parameter, which PyTorch leaves alone (grad None). It becomes
  // a view again in the pass that next produces it (adopt_bucket_view).
  if (options.gradient_as_bucket_view) give_torch_the_bucket_views(/*undefined_too=*/false);
}

void DistributedDataParallel::State::give_torch_the_bucket_views(bool undefined_too) {
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].grad().defined()) {
      adopt_bucket_view(i);
    } else if (undefined_too) {
      params[i].mutable_grad() = from_tensor(bucket_views[i]);
      grads[i] = bucket_views[i];
    }
  }
}

DistributedDataParallel::DistributedDataParallel(ProcessGroup& pg, std::shared_ptr<::torch::nn::Module> module,
                                                 DdpOptions options)
    : state_(std::make_shared<State>(pg, std::move(module), std::move(options))) {
  State& s = *state_;
  if (!s.module) throw InvalidArgument("distcomm::torch::DistributedDataParallel: the module is a null pointer");
  std::unordered_set<const void*> seen;  // a parameter shared by two submodules counts once
  // Frozen parameters (requires_grad false) are not reduced, but are checked and broadcast
  // from rank 0 like the others, as PyTorch's DDP does (_verify_param_shape_across_processes,
  // _sync_module_states).
  std::vector<std::string> all_names;
  std::vector<bool> requires_grad;
  std::vector<at::Tensor> all_params;
  for (const auto& item : s.module->named_parameters(/*recurse=*/true)) {
    const at::Tensor& p = item.value();
    if (!p.defined() || !seen.insert(p.unsafeGetTensorImpl()).second) continue;
    all_names.push_back(item.key());
    requires_grad.push_back(p.requires_grad());
    all_params.push_back(p);
    if (p.requires_grad()) {
      s.names.push_back(item.key());
      s.params.push_back(p);
    }
  }
  // Before the core's round, so that a parameter frozen on some ranks only is named as that.
  FrozenParameters frozen = check_frozen_parameters(pg, all_names, requires_grad, all_params);
  const size_t n = s.params.size();
  // The reducer keeps pointers into these vectors: they are sized once, here.
  s.values.resize(n);
  s.grads.resize(n);
  s.value_copies.resize(n);
  s.grad_copies.resize(n);
  s.bucket_views.resize(n);
  s.refresh_views_locked();  // values: the parameters, or contiguous copies of strided ones
  std::vector<ddp::NamedParameter> named;
  for (size_t i = 0; i < n; ++i) {
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
    s.buffer_names.push_back(item.key());
    s.buffer_views.push_back(as_tensor(item.value()));
    buffers.push_back({item.key(), &s.buffer_views.back()});
  }
  s.ddp = std::make_unique<ddp::DistributedDataParallel>(pg, std::move(named), s.options, std::move(buffers));
  s.copy_back_values_locked();  // rank 0's values, broadcast into the copies of strided ones
  broadcast_frozen(pg, frozen);
  if (s.options.gradient_as_bucket_view) {
    s.bucket_views = s.grads;  // the reducer made every one of them a view into its bucket
    s.give_torch_the_bucket_views(/*undefined_too=*/true);
  }

  s.accumulators.resize(n);
  s.hook_keys.resize(n);
  for (size_t i = 0; i < n; ++i) {
    s.hook_accumulator(i, ::torch::autograd::impl::grad_accumulator(s.params[i]));
    s.tensor_hook_ids.push_back(s.params[i].register_hook(
        [weak = std::weak_ptr<State>(state_), i](const at::Tensor& /*grad*/) {
          if (auto state = weak.lock()) state->follow_accumulator(i);
        }));
  }
}

DistributedDataParallel::~DistributedDataParallel() {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mu);
  for (size_t i = 0; i < s.accumulators.size(); ++i) s.accumulators[i]->del_post_hook(s.hook_keys[i]);
  for (size_t i = 0; i < s.tensor_hook_ids.size(); ++i) s.params[i].remove_hook(s.tensor_hook_ids[i]);
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
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->refresh_views_locked();
  }
  // Not under the state's lock: `train` runs backward passes, whose hooks take it. After
  // it, the core broadcasts the final model into `values` and the buffers' views.
  const size_t passes = state_->ddp->join([&] {
    train();
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->refresh_views_locked();
  });
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->copy_back_values_locked();  // the final model, into strided parameters too
  return passes;
}
void DistributedDataParallel::register_comm_hook(ddp::CommHook hook) { state_->ddp->register_comm_hook(std::move(hook)); }
void DistributedDataParallel::sync_buffers() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->refresh_views_locked();
  }
  state_->ddp->sync_buffers();
}
const ddp::IterationStats& DistributedDataParallel::last_stats() const { return state_->ddp->last_stats(); }
std::vector<ddp::BucketSpec> DistributedDataParallel::buckets() const { return state_->ddp->buckets(); }
size_t DistributedDataParallel::buckets_launched() const { return state_->ddp->buckets_launched(); }
std::vector<std::string> DistributedDataParallel::parameter_names() const { return state_->names; }
::torch::nn::Module& DistributedDataParallel::module() { return *state_->module; }
ProcessGroup& DistributedDataParallel::process_group() { return state_->pg; }

}  // namespace torch
}  // namespace distcomm
