#include "ddp/distributed_data_parallel.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "api/errors.h"
#include "ddp/broadcast_coalesced.h"
#include "ddp/reducer.h"
#include "ddp/replica_check.h"

namespace distcomm {
namespace ddp {
namespace {

// Parameters and buffers are copied from rank 0 in flat buffers of about this size.
constexpr size_t kBroadcastBucketBytes = 64u << 20;

// Two parameters whose values or gradients share memory (tied weights passed under two
// names): each would be reduced on its own, into the same memory, and the result would
// depend on the order they were marked. PyTorch's named_parameters() gives a shared
// parameter once; so must the program.
void find_shared_memory(const std::vector<NamedParameter>& params, std::vector<std::string>& problems) {
  struct Span {
    const char* begin;
    const char* end;
    size_t index;
    const char* role;
  };
  std::vector<Span> spans;
  for (size_t i = 0; i < params.size(); ++i) {
    for (const auto& [t, role] : {std::make_pair(params[i].value, "value"), std::make_pair(params[i].grad, "gradient")}) {
      if (!t || !t->defined() || t->nbytes() == 0) continue;
      const char* begin = static_cast<const char*>(t->data());
      spans.push_back({begin, begin + t->nbytes(), i, role});
    }
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
  // (first, second) -> what they share, "value/gradient" of the first and of the second;
  // ordered, so that the message does not depend on where the allocator put the tensors.
  std::map<std::pair<size_t, size_t>, std::set<std::pair<std::string, std::string>>> shared;
  std::vector<size_t> open;  // the spans before the current one that reach past its start
  for (size_t k = 0; k < spans.size(); ++k) {
    const Span& b = spans[k];
    open.erase(std::remove_if(open.begin(), open.end(), [&](size_t i) { return spans[i].end <= b.begin; }),
               open.end());
    for (size_t i : open) {
      const Span& a = spans[i];
      if (a.index == b.index) continue;
      const bool a_first = a.index < b.index;
      shared[{std::min(a.index, b.index), std::max(a.index, b.index)}].insert(
          a_first ? std::make_pair(a.role, b.role) : std::make_pair(b.role, a.role));
    }
    open.push_back(k);
  }
  for (const auto& [pair, roles] : shared) {
    std::string what;
    for (const auto& [first, second] : roles) {
      what += (what.empty() ? "" : ", ") +
              (first == second ? "their " + first + "s" : "the " + first + " of the first, the " + second + " of the second");
    }
    problems.push_back("parameters " + std::to_string(pair.first) + " ('" + params[pair.first].name + "') and " +
                       std::to_string(pair.second) + " ('" + params[pair.second].name + "') share memory (" + what +
                       "): a parameter used in two places (tied weights) must be passed once, under one name");
  }
}

// Everything wrong with this rank's arguments, "; "-separated ("" when fine). Collected
// rather than thrown, so that verify_replicas can make every rank fail together.
std::string find_local_problems(const std::vector<NamedParameter>& params, const std::vector<NamedBuffer>& buffers,
                                const DdpOptions& options) {
  std::vector<std::string> problems;
  auto check_tensor = [&](const std::string& what, const Tensor* t, const char* role) {
    if (!t) {
      problems.push_back(what + ": " + role + " is a null pointer");
    } else if (!t->defined()) {
      problems.push_back(what + ": " + role + " is an undefined tensor");
    } else if (!t->is_cpu()) {
      problems.push_back(what + ": " + role + " is on " + t->device().str() +
                         "; DDP keeps its buckets in host memory and supports host tensors only");
    }
  };
  std::set<std::string> names;
  auto check_name = [&](const std::string& what, const std::string& name) {
    if (name.empty()) problems.push_back(what + " has an empty name");
    if (!names.insert(name).second) problems.push_back(what + ": the name '" + name + "' is used twice");
  };
  if (params.empty()) problems.push_back("no parameters: there are no gradients to synchronise");
  for (size_t i = 0; i < params.size(); ++i) {
    const NamedParameter& p = params[i];
    const std::string what = "parameter " + std::to_string(i) + " ('" + p.name + "')";
    check_name(what, p.name);
    const size_t before = problems.size();
    check_tensor(what, p.value, "value");
    check_tensor(what, p.grad, "grad");
    if (problems.size() != before) continue;
    if (p.grad->dtype() != p.value->dtype() || p.grad->shape() != p.value->shape()) {
      problems.push_back(what + ": grad " + p.grad->describe() + " does not match value " + p.value->describe());
    }
    if (!is_floating(p.value->dtype())) {
      // As in PyTorch, where only floating-point tensors may require grad: an average of
      // integer gradients truncates (2 and 3 give 2), silently.
      problems.push_back(what + ": a parameter must be floating point, got " + dtype_name(p.value->dtype()) +
                         " (an averaged integer gradient truncates); pass integer state as a buffer");
      continue;
    }
    std::string why;
    if (!reduce_supported(ReduceOp::AVG, p.grad->dtype(), &why)) {
      problems.push_back(what + ": gradients of dtype " + dtype_name(p.grad->dtype()) + " cannot be averaged: " + why);
    }
  }
  find_shared_memory(params, problems);
  for (size_t i = 0; i < buffers.size(); ++i) {
    const std::string what = "buffer " + std::to_string(i) + " ('" + buffers[i].name + "')";
    check_name(what, buffers[i].name);
    check_tensor(what, buffers[i].value, "value");
  }
  try {
    mebibytes_to_bytes(options.bucket_cap_mb, "bucket_cap_mb");
    mebibytes_to_bytes(options.first_bucket_cap_mb, "first_bucket_cap_mb");
  } catch (const InvalidArgument& e) {
    problems.push_back(e.what());
  }
  if (options.log_every_n < 0) problems.push_back("log_every_n must be >= 0");
  std::string joined;
  for (const std::string& p : problems) joined += (joined.empty() ? "" : "; ") + p;
  return joined;
}

// The shortest text that reads back as v: 25, 0.5, 0.1 (not 0.10000000000000001).
std::string number_text(double v) {
  char text[64];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, v);
    if (std::strtod(text, nullptr) == v) break;
  }
  return text;
}

// "every 5 iterations", or "none" (log_every_n 0, or a log_mode that is no collective).
std::string ordered_logging_text(const DdpOptions& o) {
  if (o.log_every_n <= 0 || o.log_mode != LogMode::kOrdered) return "none";
  return "every " + std::to_string(o.log_every_n) + (o.log_every_n == 1 ? " iteration" : " iterations");
}

// The options every rank must pass alike (see DdpOptions), compared in the replica round.
std::vector<std::pair<std::string, std::string>> options_that_must_agree(const DdpOptions& o) {
  auto flag = [](bool b) { return std::string(b ? "true" : "false"); };
  return {{"bucket_cap_mb", number_text(o.bucket_cap_mb)},
          {"first_bucket_cap_mb", number_text(o.first_bucket_cap_mb)},
          {"find_unused_parameters", flag(o.find_unused_parameters)},
          {"broadcast_buffers", flag(o.broadcast_buffers)},
          {"rebuild_buckets", flag(o.rebuild_buckets)},
          {"comm_hook", hook_name(o.comm_hook)},
          // Only ordered logging is a collective: ranks may log differently otherwise.
          {"ordered logging (log_every_n with LogMode::kOrdered)", ordered_logging_text(o)}};
}

ReplicaDescription describe(const std::vector<NamedParameter>& params, const std::vector<NamedBuffer>& buffers,
                            const DdpOptions& options, std::string problems) {
  ReplicaDescription d;
  d.local_problems = std::move(problems);
  if (!d.local_problems.empty()) return d;
  d.options = options_that_must_agree(options);
  for (const NamedParameter& p : params) d.entries.push_back("parameter '" + p.name + "' " + p.value->describe());
  for (const NamedBuffer& b : buffers) d.entries.push_back("buffer '" + b.name + "' " + b.value->describe());
  return d;
}

// The highest rank whose element of a join notice is set; -1 when none (every rank joined).
int highest_training_rank(const Tensor& notice) {
  if (!notice.defined()) return -1;
  for (int64_t r = notice.numel(); r-- > 0;) {
    if (notice.item(r) != 0) return static_cast<int>(r);
  }
  return -1;
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(ProcessGroup& pg, std::vector<NamedParameter> parameters,
                                                 DdpOptions options, std::vector<NamedBuffer> buffers)
    : pg_(pg), parameters_(std::move(parameters)), buffers_(std::move(buffers)), options_(std::move(options)) {
  verify_replicas(pg_, describe(parameters_, buffers_, options_, find_local_problems(parameters_, buffers_, options_)));

  std::vector<Tensor*> state;
  for (const NamedParameter& p : parameters_) state.push_back(p.value);
  for (const NamedBuffer& b : buffers_) state.push_back(b.value);
  broadcast_coalesced(pg_, state, /*root=*/0, kBroadcastBucketBytes);

  ReducerOptions ro;
  ro.caps.bucket_bytes = mebibytes_to_bytes(options_.bucket_cap_mb, "bucket_cap_mb");
  ro.caps.first_bucket_bytes = mebibytes_to_bytes(options_.first_bucket_cap_mb, "first_bucket_cap_mb");
  ro.find_unused_parameters = options_.find_unused_parameters;
  ro.gradient_as_bucket_view = options_.gradient_as_bucket_view;
  ro.rebuild_buckets = options_.rebuild_buckets;
  ro.comm_hook = options_.comm_hook;
  std::vector<GradientRef> grads;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    grads.push_back({parameters_[i].name, parameters_[i].grad});
    index_of_[parameters_[i].name] = i;
  }
  reducer_ = std::make_unique<Reducer>(pg_, std::move(grads), std::move(ro));
}

DistributedDataParallel::~DistributedDataParallel() = default;

void DistributedDataParallel::mark_grad_ready(size_t index) { reducer_->mark_ready(index); }

void DistributedDataParallel::mark_grad_ready(const std::string& name) {
  auto it = index_of_.find(name);
  if (it == index_of_.end()) throw InvalidArgument("DDP mark_grad_ready: no parameter is named '" + name + "'");
  reducer_->mark_ready(it->second);
}

void DistributedDataParallel::finish_backward() {
  bool synced = false;
  try {
    synced = reducer_->finish_backward();
  } catch (const Error&) {
    // A pass every rank failed alike still said who trains: the final model's source
    // follows it, as after a pass that worked.
    if (joining_ && reducer_->last_failure_agreed()) join_root_ = highest_training_rank(reducer_->last_notice());
    throw;
  }
  if (synced) after_synced_pass();  // not under no_sync()
}

void DistributedDataParallel::after_synced_pass() {
  if (joining_) join_root_ = highest_training_rank(reducer_->last_notice());
  if (options_.broadcast_buffers && !buffers_.empty()) sync_buffers();
  const IterationStats& stats = reducer_->last_stats();
  if (options_.log_every_n > 0 && stats.iteration % static_cast<uint64_t>(options_.log_every_n) == 0) {
    log_with_mode(options_.log_mode, &pg_, "DDP " + stats.summary());
  }
}

DistributedDataParallel::NoSyncGuard::NoSyncGuard(Reducer* reducer) : reducer_(reducer), previous_(reducer->sync()) {
  reducer_->set_sync(false);
}

DistributedDataParallel::NoSyncGuard::NoSyncGuard(NoSyncGuard&& other) noexcept
    : reducer_(other.reducer_), previous_(other.previous_) {
  other.reducer_ = nullptr;
}

DistributedDataParallel::NoSyncGuard::~NoSyncGuard() {
  if (reducer_) reducer_->set_sync(previous_);
}

DistributedDataParallel::NoSyncGuard DistributedDataParallel::no_sync() { return NoSyncGuard(reducer_.get()); }

void DistributedDataParallel::register_comm_hook(CommHook hook) { reducer_->set_comm_hook(std::move(hook)); }

void DistributedDataParallel::sync_buffers() {
  std::vector<Tensor*> values;
  for (const NamedBuffer& b : buffers_) values.push_back(b.value);
  // Inside join, rank 0 may have stopped training: the highest rank still training has
  // buffers that moved with the model (PyTorch takes the same rank).
  const int root = joining_ && join_root_ >= 0 ? join_root_ : 0;
  broadcast_coalesced(pg_, values, root, kBroadcastBucketBytes);
}

size_t DistributedDataParallel::join(const std::function<void()>& train, const JoinOptions& options) {
  const std::string head = "DDP join (rank " + std::to_string(pg_.rank()) + "): ";
  if (joining_) throw InvalidArgument(head + "already inside join()");
  if (reducer_->in_backward()) throw InvalidArgument(head + "a backward pass is under way; call finish_backward() first");
  if (!reducer_->sync()) throw InvalidArgument(head + "called under no_sync(); leave it first");
  if (!options.divide_by_initial_world_size) {
    // Refused here, alike on every rank (they share the hook), before any pass: the
    // rescaling is of the built-in hooks' average over the world. (Parameters are floating
    // point: the constructor refuses others.)
    if (!reducer_->builtin_hook()) {
      throw InvalidArgument(head + "divide_by_initial_world_size=false needs one of DDP's own comm hooks "
                                   "(allreduce_hook, fp16_compress_hook, bf16_compress_hook); a hook of yours "
                                   "divides by what it chooses");
    }
  }
  joining_ = true;
  join_root_ = -1;
  reducer_->set_joining(++joins_, options.divide_by_initial_world_size);
  struct Leave {
    DistributedDataParallel& ddp;
    ~Leave() {
      ddp.joining_ = false;
      ddp.reducer_->set_joining(0);
    }
  } leave{*this};
  train();
  if (reducer_->in_backward()) {
    throw InvalidArgument(head + "the training loop returned inside a backward pass (gradients marked ready, "
                                 "finish_backward() not called)");
  }
  if (!reducer_->sync()) throw InvalidArgument(head + "the training loop returned under no_sync()");
  // This rank's inputs have ended: run the others' passes with it until none trains.
  size_t shadowed = 0;
  while (true) {
    Tensor notice;
    try {
      notice = reducer_->shadow_pass();
    } catch (const Error&) {
      // An error every rank raises alike in a pass (a gradient a rank still training
      // missed) is theirs to handle: they may catch it and go on, and this rank goes on
      // running passes for them, as a joined rank does in PyTorch. (Leaving would pair its
      // next collectives with their passes.) The pass ended before the buffers' broadcast
      // on every rank, so none follows here either. Anything else -- the communication's
      // failure, this rank's own comm hook's, a misuse -- is this rank's, and ends its join:
      // repeating the pass could only fail again.
      if (!reducer_->last_failure_agreed()) throw;
      join_root_ = highest_training_rank(reducer_->last_notice());
      ++shadowed;
      continue;
    }
    if (highest_training_rank(notice) < 0) break;
    after_synced_pass();
    ++shadowed;
  }
  // One model on every rank: the ranks that joined early stopped updating theirs.
  if (join_root_ >= 0) {
    std::vector<Tensor*> state;
    for (const NamedParameter& p : parameters_) state.push_back(p.value);
    for (const NamedBuffer& b : buffers_) state.push_back(b.value);
    broadcast_coalesced(pg_, state, join_root_, kBroadcastBucketBytes);
  }
  return shadowed;
}

const IterationStats& DistributedDataParallel::last_stats() const { return reducer_->last_stats(); }
std::vector<BucketSpec> DistributedDataParallel::buckets() const { return reducer_->buckets(); }
size_t DistributedDataParallel::buckets_launched() const { return reducer_->buckets_launched(); }

}  // namespace ddp
}  // namespace distcomm
