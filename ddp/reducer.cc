#include "ddp/reducer.h"

#include <algorithm>
#include <exception>
#include <limits>
#include <utility>

#include "api/errors.h"
#include "api/reduce_op.h"
#include "api/diagnostics/timeline.h"
#include "ddp/message_format.h"

namespace distcomm {
namespace ddp {
namespace {

// Bits of the per-gradient usage byte each rank contributes when usage is gathered.
constexpr uint8_t kMarkedThisBackward = 1;
constexpr uint8_t kUsedSinceSync = 2;  // also in no_sync backward passes since the last sync
constexpr size_t kMaxNamed = 10;       // gradients named in one error message

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Reducer::Clock::now().time_since_epoch()).count();
}

}  // namespace

Reducer::Reducer(ProcessGroup& pg, std::vector<GradientRef> gradients, ReducerOptions options)
    : pg_(pg), grads_(std::move(gradients)), options_(std::move(options)) {
  if (!options_.comm_hook) options_.comm_hook = allreduce_hook();
  const size_t n = grads_.size();
  bucket_of_.assign(n, 0);
  slot_of_.assign(n, 0);
  marked_.assign(n, false);
  used_.assign(n, false);
  stashed_.assign(n, Tensor());
  build_buckets(assignment_for(reverse_order(n)));
}

Reducer::~Reducer() = default;  // in-flight reductions keep their buffers alive (see launch)

void Reducer::set_comm_hook(CommHook hook) {
  if (in_backward_) throw InvalidArgument("DDP: a comm hook cannot be changed during a backward pass");
  if (divide_by_training_ && hook && !is_builtin_hook(hook)) {
    throw InvalidArgument("DDP: inside join(divide_by_initial_world_size=false) the comm hook must stay one of DDP's "
                          "own; a hook of yours divides by what it chooses");
  }
  options_.comm_hook = hook ? std::move(hook) : allreduce_hook();
}

std::vector<BucketSpec> Reducer::buckets() const {
  std::vector<BucketSpec> specs;
  for (const Bucket& b : buckets_) specs.push_back(b.spec);
  return specs;
}

std::vector<BucketSpec> Reducer::assignment_for(const std::vector<size_t>& order) const {
  std::vector<GradientSpec> specs;
  for (const GradientRef& g : grads_) specs.push_back({g.grad->numel(), g.grad->dtype(), g.grad->device()});
  return assign_buckets(specs, order, options_.caps);
}

void Reducer::build_buckets(const std::vector<BucketSpec>& assignment) {
  std::vector<Bucket> fresh(assignment.size());
  usage_tail_ = Tensor();
  for (size_t b = 0; b < assignment.size(); ++b) {
    Bucket& bucket = fresh[b];
    bucket.spec = assignment[b];
    // The last bucket of a floating dtype has room for one extra element per gradient: the
    // usage flags (fill_usage_tail), reduced with the gradients at no extra collective when
    // the hook is a built-in one (launch). A hook of the user's sees the gradients alone.
    const bool carries_usage = b + 1 == assignment.size() && is_floating(bucket.spec.dtype);
    const int64_t tail = carries_usage ? static_cast<int64_t>(grads_.size()) : 0;
    bucket.buffer = Tensor::zeros({bucket.spec.numel + tail}, bucket.spec.dtype);
    if (carries_usage) usage_tail_ = bucket.buffer.flat_slice(bucket.spec.numel, tail);
    bucket.pending = bucket.spec.gradients.size();
    bucket.hook_view.index = b;
    bucket.hook_view.num_buckets = assignment.size();
    bucket.hook_view.parameter_indices = bucket.spec.gradients;
    bucket.hook_view.offsets = bucket.spec.offsets;
    for (size_t k = 0; k < bucket.spec.gradients.size(); ++k) {
      const size_t i = bucket.spec.gradients[k];
      Tensor& grad = *grads_[i].grad;
      Tensor view = bucket.buffer.flat_slice(bucket.spec.offsets[k], grad.numel()).reshape(grad.shape());
      if (options_.gradient_as_bucket_view) {
        view.copy_from(grad);  // keep what the gradient holds, then make it live in the bucket
        grad = view;
      }
      bucket.views.push_back(view);
      bucket_of_[i] = b;
      slot_of_[i] = k;
    }
  }
  buckets_ = std::move(fresh);
}

bool Reducer::is_bucket_view(size_t i) const {
  // The user may have replaced a gradient tensor; then it is copied like any other.
  return options_.gradient_as_bucket_view &&
         grads_[i].grad->data() == buckets_[bucket_of_[i]].views[slot_of_[i]].data();
}

void Reducer::mark_ready(size_t index) {
  if (index >= grads_.size()) {
    throw InvalidArgument("DDP mark_grad_ready(" + std::to_string(index) + "): there are only " +
                          std::to_string(grads_.size()) + " parameters");
  }
  if (marked_[index]) {
    throw Error("DDP: gradient of '" + grads_[index].name + "' (parameter " + std::to_string(index) +
                ") was marked ready twice in one backward pass; call finish_backward() at the end of "
                "every backward pass, also under no_sync()");
  }
  if (!in_backward_) {
    in_backward_ = true;
    syncing_ = sync_;
    backward_start_ = Clock::now();
    begin_pass();
  }
  marked_[index] = used_[index] = true;
  ready_order_.push_back(index);
  if (!syncing_) return;
  Bucket& bucket = buckets_[bucket_of_[index]];
  if (!is_bucket_view(index)) bucket.views[slot_of_[index]].copy_from(*grads_[index].grad);
  if (--bucket.pending == 0) {
    if (timeline_enabled()) {
      timeline_instant(timeline_rank(), timeline_lane(), "bucket " + std::to_string(bucket_of_[index]) + " ready",
                       timeline_now_ns(), "\"bucket\":" + std::to_string(bucket_of_[index]));
    }
    launch_ready_buckets();
  }
}

void Reducer::begin_pass() {
  notice_ = Tensor();
  if (join_number_ == 0 || !syncing_) return;
  // Before any bucket, so that a joined rank's shadow_pass matches it first.
  notice_ = Tensor::zeros({pg_.size()}, DType::kFloat32);
  notice_.set_item(pg_.rank(), 1);
  notice_work_ = issue_notice(notice_);
}

WorkPtr Reducer::issue_notice(Tensor& notice) {
  // A premul_sum is a sum with a factor, whose fingerprint is no program's own op: a
  // collective of the user's inside join (a count per rank, summed) would otherwise pair
  // with the notice of a rank that has joined, succeed with wrong data, and derail the
  // passes. Against this op it is a Desync naming both. The factor, the join's number,
  // keeps the notices of two join() calls apart in the same way.
  AllReduceOptions o;
  o.op = ReduceOp::premul_sum(static_cast<double>(join_number_));
  return pg_.all_reduce(notice, o);
}

Tensor Reducer::shadow_pass() {
  last_failure_agreed_ = false;
  if (in_backward_) throw InvalidArgument("DDP join: a backward pass is under way; call finish_backward() first");
  Tensor notice = Tensor::zeros({pg_.size()}, DType::kFloat32);
  try {
    issue_notice(notice)->wait();
  } catch (...) {
    std::rethrow_exception(with_context(std::current_exception(), "DDP join: exchanging which ranks still train"));
  }
  bool any = false;
  for (int r = 0; r < pg_.size(); ++r) any = any || notice.item(r) != 0;
  if (!any) return notice;
  // Nothing of this rank's own: every gradient contributes zero (fill_unmarked), and none
  // counts as missing (usage_flag, gather_usage).
  std::fill(used_.begin(), used_.end(), false);
  // The gradients stay this rank's own, as in PyTorch: those living in the buckets are
  // saved and given back (the others are not written, see finish_backward).
  std::vector<Tensor> saved(grads_.size());
  for (size_t i = 0; i < grads_.size(); ++i) {
    if (is_bucket_view(i)) saved[i] = grads_[i].grad->clone();
  }
  notice_ = notice;
  shadow_ = true;
  in_backward_ = true;
  syncing_ = true;
  backward_start_ = Clock::now();
  struct EndShadow {
    Reducer& reducer;
    std::vector<Tensor>& saved;
    ~EndShadow() {
      reducer.shadow_ = false;
      for (size_t i = 0; i < saved.size(); ++i) {
        if (saved[i].defined()) reducer.grads_[i].grad->copy_from(saved[i]);
      }
    }
  } end_shadow{*this, saved};
  finish_backward();
  return notice;
}

int Reducer::timeline_rank() const { return pg_.global_rank(pg_.rank()); }

std::string Reducer::timeline_lane() const { return "ddp " + pg_.name(); }

void Reducer::launch_ready_buckets() {
  // Strictly in bucket order, so every rank issues the reductions in the same order.
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].pending == 0) launch(next_bucket_++);
}

void Reducer::launch(size_t index) {
  Bucket& bucket = buckets_[index];
  bucket.launched = Clock::now();
  bucket.done_ns->store(0);
  // The last bucket launches after every other (when every gradient is marked, or from
  // finish_backward): this rank's usage is final now.
  const bool last = index + 1 == buckets_.size();
  const bool rides = last && usage_rides_in_last_bucket();
  if (rides) fill_usage_tail();
  // The hook reduces the tail only when the flags ride; otherwise it sees the gradients alone.
  bucket.hook_view.buffer = rides ? bucket.buffer : bucket.buffer.flat_slice(0, bucket.spec.numel);
  std::exception_ptr failure;
  try {
    bucket.work = options_.comm_hook(pg_, bucket.hook_view);
  } catch (...) {
    failure = with_context(std::current_exception(), "DDP: the comm hook of " + bucket_name(index));
  }
  // Named here, not thrown into the catch above: its message already says which bucket.
  if (!failure && !bucket.work) {
    failure = std::make_exception_ptr(Error("DDP: the comm hook of " + bucket_name(index) +
                                            " returned no Work; a hook must return the Work of the collective it "
                                            "issued for the bucket"));
  }
  if (failure) {
    // The pass cannot go on (its later buckets would pair with the others' next ones):
    // end it here, so that this rank's next pass starts afresh, not "marked twice".
    abandon_pass();
    std::rethrow_exception(failure);
  }
  // Otherwise DDP exchanges the flags itself, queued right behind the last bucket's reduction.
  if (last && !rides) usage_work_ = gather_usage(usage_gathered_);
  // The callback holds the buffer: if the reducer goes away mid-flight, the memory the
  // backend writes into stays alive until the reduction ends.
  bucket.work->on_finish([done = bucket.done_ns, keep_alive = bucket.buffer](std::exception_ptr) {
    done->store(now_ns());
  });
  if (timeline_enabled()) {
    // The bucket's reduction on the timeline: from its launch to its end, on the backend's thread.
    bucket.work->on_finish([rank = timeline_rank(), lane = timeline_lane(), started = timeline_now_ns(),
                            name = "bucket " + std::to_string(index) + " all_reduce",
                            args = "\"bucket\":" + std::to_string(index) +
                                   ",\"bytes\":" + std::to_string(bucket.spec.nbytes())](std::exception_ptr error) {
      timeline_async_span(rank, lane, name, started, timeline_now_ns(),
                        args + ",\"state\":" + (error ? "\"failed\"" : "\"completed\""));
    });
  }
}

void Reducer::fill_unmarked(Bucket& bucket) {
  for (size_t k = 0; k < bucket.spec.gradients.size(); ++k) {
    const size_t i = bucket.spec.gradients[k];
    if (marked_[i]) continue;
    Tensor& view = bucket.views[k];
    if (used_[i]) {  // accumulated under no_sync(): that sum is this rank's contribution
      if (!is_bucket_view(i)) view.copy_from(*grads_[i].grad);
      continue;
    }
    // Unused here: contribute zero. A gradient living in the bucket is saved first, to be
    // given back untouched if no rank used the parameter.
    if (is_bucket_view(i)) stashed_[i] = view.clone();
    view.fill(0.0);
  }
}

std::string Reducer::bucket_name(size_t index) const {
  const BucketSpec& spec = buckets_[index].spec;
  std::string s = "bucket " + std::to_string(index) + " of " + std::to_string(buckets_.size()) + " (" +
                  dtype_name(spec.dtype) + ", " + format_bytes(static_cast<double>(spec.nbytes())) + ": ";
  for (size_t k = 0; k < spec.gradients.size() && k < kMaxNamed; ++k) s += (k ? ", " : "") + grads_[spec.gradients[k]].name;
  if (spec.gradients.size() > kMaxNamed) s += ", ...";
  return s + ")";
}

bool Reducer::finish_backward() {
  last_failure_agreed_ = false;
  if (!in_backward_) syncing_ = sync_;
  if (!syncing_) {  // no_sync(): gradients stay local and accumulate
    end_iteration(/*synced=*/false);
    return false;
  }
  const Clock::time_point finish_called = Clock::now();
  if (!in_backward_) {
    backward_start_ = finish_called;
    begin_pass();
  }
  // Launch what is left, gradients this rank never produced included, so that every rank
  // issues the same reductions whatever its own backward pass did.
  const size_t started_in_backward = next_bucket_;
  for (size_t b = next_bucket_; b < buckets_.size(); ++b) fill_unmarked(buckets_[b]);
  while (next_bucket_ < buckets_.size()) launch(next_bucket_++);
  // Which gradients each rank produced went with the last bucket's launch (launch).
  const std::exception_ptr error = wait_all(usage_work_);
  ++iterations_;
  record_stats(finish_called, Clock::now());
  stats_.buckets_started_in_backward = started_in_backward;
  last_failure_agreed_ = false;
  try {
    if (error) std::rethrow_exception(error);
    std::vector<bool> used_anywhere;
    try {
      used_anywhere = agree_on_usage(usage_gathered_);
    } catch (const Error& e) {
      // Decided from the flags every rank gathered: every rank raises it, unless it is the
      // communication's own failure (naming the flags' exchange).
      last_failure_agreed_ = !dynamic_cast<const PeerFailure*>(&e) && !dynamic_cast<const Timeout*>(&e) &&
                             !dynamic_cast<const Desync*>(&e);
      throw;
    }
    for (size_t i = 0; i < used_anywhere.size(); ++i) {
      if (!used_anywhere[i]) stats_.unused_parameters.push_back(i);
    }
    if (!shadow_ && divide_by_training_) average_over_training_ranks();
    if (!shadow_) write_back(used_anywhere);
    if (!rebuilt_ && options_.rebuild_buckets) rebuild_buckets();
  } catch (...) {
    for (size_t i = 0; i < grads_.size(); ++i) {
      if (stashed_[i].defined()) buckets_[bucket_of_[i]].views[slot_of_[i]].copy_from(stashed_[i]);
    }
    end_iteration(/*synced=*/true);
    throw;
  }
  end_iteration(/*synced=*/true);
  return true;
}

WorkPtr Reducer::gather_usage(Tensor& gathered) const {
  const size_t n = grads_.size();
  Tensor mine = Tensor::zeros({static_cast<int64_t>(n)}, DType::kUInt8);
  uint8_t* bits = mine.data_as<uint8_t>();
  for (size_t i = 0; i < n; ++i) {
    // A pass for the others (join) produced nothing, and missed nothing either.
    bits[i] = (marked_[i] || shadow_ ? kMarkedThisBackward : 0) | (used_[i] ? kUsedSinceSync : 0);
  }
  gathered = Tensor::empty({static_cast<int64_t>(n) * pg_.size()}, DType::kUInt8);
  return pg_.all_gather_into_tensor(gathered, mine);
}

bool Reducer::usage_rides_in_last_bucket() const {
  // Only a hook of DDP's own is known to average every element: a user's may sparsify or
  // quantize, and would lose the small 1.0 flags next to large gradients.
  return usage_tail_.defined() && is_builtin_hook(options_.comm_hook);
}

bool Reducer::usage_flag(size_t i) const {
  // With find_unused_parameters: used since the last synchronised pass; without: missed
  // (never in a pass a joined rank runs for the others).
  return options_.find_unused_parameters ? used_[i] : !marked_[i] && !shadow_;
}

void Reducer::fill_usage_tail() {
  // Averaged across ranks, an element is non-zero iff some rank set it.
  for (size_t i = 0; i < grads_.size(); ++i) usage_tail_.set_item(static_cast<int64_t>(i), usage_flag(i) ? 1.0 : 0.0);
}

void Reducer::check_own_flags_kept(const std::vector<bool>& flagged) const {
  // A reduced flag is non-zero iff some rank set it, so this rank's own can never come back
  // zero; if one does, the reduction lost it, and every decision taken from the flags (which
  // gradients to average, or whether a rank missed one) would be silently wrong.
  for (size_t i = 0; i < grads_.size(); ++i) {
    if (!usage_flag(i) || flagged[i]) continue;
    throw Error("DDP (rank " + std::to_string(pg_.rank()) + "): internal error: '" + grads_[i].name +
                "' (parameter " + std::to_string(i) + ") was " +
                (options_.find_unused_parameters ? "used on this rank, but the usage flags reduced with the last "
                                                   "bucket say that no rank used it"
                                                 : "not marked ready on this rank, but the usage flags reduced "
                                                   "with the last bucket say that every rank marked it") +
                "; the reduction corrupted the flags, so this iteration's gradients are not to be trusted");
  }
}

std::vector<bool> Reducer::agree_on_usage(Tensor gathered) {
  const size_t n = grads_.size();
  const bool find_unused = options_.find_unused_parameters;
  std::vector<bool> flagged(n, false);
  if (!gathered.defined()) {
    bool any = false;
    for (size_t i = 0; i < n; ++i) {
      flagged[i] = usage_tail_.item(static_cast<int64_t>(i)) != 0;
      any = any || flagged[i];
    }
    check_own_flags_kept(flagged);
    if (find_unused) return flagged;                  // used by some rank
    if (!any) return std::vector<bool>(n, true);      // every rank marked every gradient
    // Some rank missed a gradient. Every rank sees the same reduced flags, so all of them
    // gather the details together, to name the gradients and the ranks.
    gather_usage(gathered)->wait();
  }
  if (!find_unused) {
    check_all_marked(gathered);
    return std::vector<bool>(n, true);
  }
  const uint8_t* bits = gathered.data_as<uint8_t>();
  for (size_t i = 0; i < n; ++i) {
    for (int r = 0; r < pg_.size(); ++r) flagged[i] = flagged[i] || (bits[static_cast<size_t>(r) * n + i] & kUsedSinceSync);
  }
  return flagged;
}

std::exception_ptr Reducer::wait_all(const WorkPtr& usage_work) {
  // Wait for everything even after a failure: nothing may still write into the buckets
  // when the next iteration starts.
  std::exception_ptr first;
  if (notice_work_) {
    try {
      notice_work_->wait();
    } catch (...) {
      first = with_context(std::current_exception(), "DDP join: exchanging which ranks still train");
    }
  }
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const int64_t wait_start = timeline_enabled() ? timeline_now_ns() : 0;
    try {
      buckets_[b].work->wait();
      if (wait_start) {
        timeline_complete(timeline_rank(), timeline_lane(), "bucket " + std::to_string(b) + " waited",
                          wait_start, timeline_now_ns(), "\"bucket\":" + std::to_string(b));
      }
    } catch (...) {
      if (!first) first = with_context(std::current_exception(), "DDP: reducing " + bucket_name(b));
    }
  }
  try {
    if (usage_work) usage_work->wait();
  } catch (...) {
    if (!first) first = with_context(std::current_exception(), "DDP: exchanging which gradients each rank produced");
  }
  return first;
}

void Reducer::check_all_marked(const Tensor& usage) const {
  const size_t n = grads_.size();
  const uint8_t* bits = usage.data_as<uint8_t>();
  std::vector<std::string> missing;
  for (size_t i = 0; i < n; ++i) {
    std::vector<int> ranks;
    for (int r = 0; r < pg_.size(); ++r) {
      if (!(bits[static_cast<size_t>(r) * n + i] & kMarkedThisBackward)) ranks.push_back(r);
    }
    if (!ranks.empty()) missing.push_back("'" + grads_[i].name + "' (parameter " + std::to_string(i) + ") on " + rank_list(ranks));
  }
  if (missing.empty()) return;
  std::string names;
  for (size_t k = 0; k < missing.size() && k < kMaxNamed; ++k) names += (k ? ", " : "") + missing[k];
  if (missing.size() > kMaxNamed) names += ", and " + std::to_string(missing.size() - kMaxNamed) + " more";
  throw Error("DistributedDataParallel (rank " + std::to_string(pg_.rank()) + "): " +
              std::to_string(missing.size()) + " parameter(s) got no gradient in this backward pass: " + names +
              ". If some parameters take no part in the loss on some iterations or ranks, construct "
              "DistributedDataParallel with find_unused_parameters = true; otherwise call "
              "mark_grad_ready for every parameter in every backward pass. This iteration's gradients "
              "were not averaged; the next iteration starts clean.");
}

void Reducer::write_back(const std::vector<bool>& used_anywhere) {
  for (size_t i = 0; i < grads_.size(); ++i) {
    Tensor& view = buckets_[bucket_of_[i]].views[slot_of_[i]];
    if (used_anywhere[i]) {
      if (!is_bucket_view(i)) grads_[i].grad->copy_from(view);
    } else if (stashed_[i].defined()) {
      // No rank used it: its gradient is left as it was, as if DDP were not there.
      view.copy_from(stashed_[i]);
    }
  }
}

void Reducer::average_over_training_ranks() {
  int training = 0;
  for (int r = 0; r < pg_.size(); ++r) training += notice_.item(r) != 0 ? 1 : 0;
  // A pass this rank runs itself has it training; no rank's pass has none.
  if (training == 0 || training == pg_.size()) return;
  const double factor = static_cast<double>(pg_.size()) / training;
  for (Bucket& bucket : buckets_) {
    scale_in_place(bucket.buffer.data(), static_cast<size_t>(bucket.spec.numel), bucket.spec.dtype, factor);
  }
}

void Reducer::rebuild_buckets() {
  rebuilt_ = true;
  const size_t n = grads_.size();
  Tensor order = Tensor::empty({static_cast<int64_t>(n)}, DType::kInt64);
  int64_t* o = order.data_as<int64_t>();
  if (pg_.rank() == 0) {
    // Rank 0's ready order, then the gradients it never marked, last parameter first.
    size_t k = 0;
    for (size_t i : ready_order_) o[k++] = static_cast<int64_t>(i);
    for (size_t i = n; i-- > 0;) {
      if (!marked_[i]) o[k++] = static_cast<int64_t>(i);
    }
  }
  pg_.broadcast(order)->wait();
  std::vector<BucketSpec> assignment = assignment_for(std::vector<size_t>(o, o + n));
  if (assignment != buckets()) build_buckets(assignment);
}

void Reducer::record_stats(Clock::time_point finish_called, Clock::time_point waited) {
  auto ms = [&](Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(t - backward_start_).count();
  };
  stats_ = IterationStats();
  stats_.iteration = iterations_;
  std::vector<Interval> intervals;
  for (const Bucket& b : buckets_) {
    stats_.bucket_bytes.push_back(b.spec.nbytes());
    stats_.bucket_grads.push_back(b.spec.gradients.size());
    stats_.bytes_reduced += b.spec.nbytes();
    const int64_t done = b.done_ns->load();
    const Clock::time_point end = done ? Clock::time_point(std::chrono::nanoseconds(done)) : waited;
    intervals.push_back({ms(b.launched), ms(end)});
  }
  stats_.backward_ms = ms(finish_called);
  const double inf = std::numeric_limits<double>::infinity();
  stats_.comm_ms = covered_length(intervals, -inf, inf);
  stats_.overlapped_ms = covered_length(intervals, 0.0, stats_.backward_ms);
  stats_.wait_ms = std::chrono::duration<double, std::milli>(waited - finish_called).count();
}

void Reducer::abandon_pass() {
  last_failure_agreed_ = false;
  // Nothing may write into the buckets once the pass is over. Their errors are not what
  // failed the pass (the hook did, which the caller reports); each op has its deadline.
  const auto wait_quietly = [](const WorkPtr& w) {
    try {
      if (w) w->wait();
    } catch (const std::exception&) {
    }
  };
  wait_quietly(notice_work_);
  for (Bucket& b : buckets_) wait_quietly(b.work);
  wait_quietly(usage_work_);
  for (size_t i = 0; i < grads_.size(); ++i) {
    if (stashed_[i].defined()) buckets_[bucket_of_[i]].views[slot_of_[i]].copy_from(stashed_[i]);
  }
  end_iteration(/*synced=*/true);
}

void Reducer::end_iteration(bool synced) {
  std::fill(marked_.begin(), marked_.end(), false);
  if (synced) std::fill(used_.begin(), used_.end(), false);
  std::fill(stashed_.begin(), stashed_.end(), Tensor());
  ready_order_.clear();
  usage_work_.reset();
  usage_gathered_ = Tensor();
  notice_work_.reset();
  for (Bucket& b : buckets_) {
    b.pending = b.spec.gradients.size();
    b.work.reset();
  }
  next_bucket_ = 0;
  in_backward_ = false;
}

}  // namespace ddp
}  // namespace distcomm
