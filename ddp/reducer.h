// Reducer: the engine of DistributedDataParallel. It owns the gradient buckets, learns
// from mark_ready() which gradients are final, launches a bucket's reduction (through the
// comm hook) as soon as the bucket is full -- while backward goes on -- and, in
// finish_backward(), waits, checks that every rank marked every gradient (or handles
// unused parameters), and writes the averaged gradients back.
//
// Collective discipline: buckets are launched strictly in bucket order, which is the same
// on every rank, and finish_backward() always launches the buckets that are still missing
// (with zeros for gradients this rank never produced). Which gradients each rank produced
// (the unused-parameter decision, or the error naming a gradient a rank missed) never
// depends on a user's comm hook. With DDP's built-in hooks (is_builtin_hook), which average
// every element, it rides in the last bucket: a flag per gradient after its gradients, no
// extra collective. With any other hook (it sees the gradients alone, and may sparsify or
// quantize them), or where the last bucket is not floating point, DDP all_gathers the flags
// itself, issued right after the last bucket's hook so that it overlaps that reduction.
// (Where the flags ride, a rank that missed a gradient makes every rank all_gather them, to
// name it.) So however the ranks' backward passes differ, they issue the same collectives,
// and a rank that skipped a gradient makes every rank raise the same error instead of
// leaving the others waiting. Inside DDP's join (uneven inputs), a rank whose own passes have ended
// runs shadow passes: the same collectives, with zero gradients that are not missing.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "api/process_group.h"
#include "api/tensor.h"
#include "api/work.h"
#include "ddp/bucket_assignment.h"
#include "ddp/comm_hooks.h"
#include "ddp/ddp_stats.h"

namespace distcomm {
namespace ddp {

// A gradient the reducer manages: the Tensor object is the caller's (with
// gradient_as_bucket_view the reducer points it at bucket memory).
struct GradientRef {
  std::string name;
  Tensor* grad = nullptr;
};

struct ReducerOptions {
  BucketCaps caps;
  bool find_unused_parameters = false;
  bool gradient_as_bucket_view = false;
  // After the first synchronised iteration, rebuild the buckets in the order gradients
  // actually became ready on rank 0 (broadcast, so every rank agrees).
  bool rebuild_buckets = true;
  CommHook comm_hook;  // empty: allreduce_hook()
};

class Reducer {
 public:
  using Clock = std::chrono::steady_clock;

  // Not collective (the caller has checked the ranks agree). The gradients must be valid
  // host tensors; the caller validates them.
  Reducer(ProcessGroup& pg, std::vector<GradientRef> gradients, ReducerOptions options);
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // The gradient `index` is final for this backward pass. When it completes a bucket (and
  // every earlier bucket has been launched), the bucket's reduction starts now.
  void mark_ready(size_t index);
  // Ends a backward pass (see the class comment). Rethrows a failed reduction with the
  // bucket named, or throws Error naming gradients some rank never marked ready. Returns
  // whether the pass was synchronised (false under no_sync). A comm hook that throws or
  // returns no Work (here or in mark_ready) ends the pass: the reductions already launched
  // are waited for, and the next backward pass starts afresh.
  bool finish_backward();
  // Whether the last synchronised pass failed with an error every rank raised alike (a
  // gradient some rank never marked ready, decided from the flags every rank gathered),
  // rather than this rank's own (its comm hook) or the communication's.
  bool last_failure_agreed() const { return last_failure_agreed_; }

  // With sync off (DDP's no_sync), mark_ready only records use and gradients accumulate
  // locally; the next synchronised backward reduces the accumulated sums.
  void set_sync(bool sync) { sync_ = sync; }
  bool sync() const { return sync_; }
  void set_comm_hook(CommHook hook);
  // Whether the hook is one of DDP's own (is_builtin_hook).
  bool builtin_hook() const { return is_builtin_hook(options_.comm_hook); }
  bool in_backward() const { return in_backward_; }

  // Uneven inputs (DistributedDataParallel::join). While joining (join_number > 0: the
  // how-manieth join() of this DDP), every synchronised pass of this rank begins with the
  // join notice: a float32 premul_sum by join_number of one element per rank, 1 where the
  // rank still trains (join_number once multiplied), issued before the first bucket. The
  // factor is in the op's fingerprint: no op of the program's own pairs with it, nor does the
  // notice of another join() (a rank that left one with an exception and entered the next
  // while the others still run the first), which is a Desync naming both. 0: not joining.
  // divide_by_initial_world_size false (PyTorch's join option): a pass's average is over
  // the ranks still training in it (the notice's nonzero elements), not over the world.
  // The built-in hooks divide by the world; the reducer then rescales the bucket by
  // world / training, before the gradients are written back. Only with a built-in hook
  // (DistributedDataParallel::join refuses others: a hook of yours does its own dividing).
  void set_joining(uint64_t join_number, bool divide_by_initial_world_size = true) {
    join_number_ = join_number;
    divide_by_training_ = join_number != 0 && !divide_by_initial_world_size;
  }
  // For a rank whose own passes have ended: the next notice with this rank's element 0;
  // unless every element is 0 (every rank has joined), then one pass like the others',
  // with zero gradients that count as produced; this rank's gradient tensors are left as
  // they were. Returns the notice.
  Tensor shadow_pass();
  // The notice of the last synchronised pass (undefined when it had none).
  const Tensor& last_notice() const { return notice_; }

  // Buckets in launch order (as of now; the first iteration may rebuild them).
  std::vector<BucketSpec> buckets() const;
  // Buckets whose reduction has started in the backward pass under way.
  size_t buckets_launched() const { return next_bucket_; }
  const IterationStats& last_stats() const { return stats_; }

 private:
  struct Bucket {
    BucketSpec spec;
    Tensor buffer;             // flat, spec.numel elements
    std::vector<Tensor> views; // per member, shaped like its gradient, into buffer
    size_t pending = 0;        // members not yet marked ready in this backward
    GradBucket hook_view;      // what the comm hook gets; lives as long as the bucket
    WorkPtr work;
    Clock::time_point launched;
    // Set from the backend's thread when the reduction ends (ns on Clock).
    std::shared_ptr<std::atomic<int64_t>> done_ns = std::make_shared<std::atomic<int64_t>>(0);
  };

  void begin_pass();
  WorkPtr issue_notice(Tensor& notice);
  std::vector<BucketSpec> assignment_for(const std::vector<size_t>& order) const;
  void build_buckets(const std::vector<BucketSpec>& assignment);
  bool is_bucket_view(size_t index) const;
  void launch_ready_buckets();
  void launch(size_t bucket_index);
  void fill_unmarked(Bucket& bucket);
  std::exception_ptr wait_all(const WorkPtr& usage_work);
  WorkPtr gather_usage(Tensor& gathered) const;
  bool usage_rides_in_last_bucket() const;
  bool usage_flag(size_t index) const;
  void fill_usage_tail();
  std::vector<bool> agree_on_usage(Tensor gathered);
  void check_own_flags_kept(const std::vector<bool>& flagged) const;
  void check_all_marked(const Tensor& usage) const;
  void write_back(const std::vector<bool>& used_anywhere);
  // divide_by_training_: the buckets' gradients (not the usage tail), averaged over the
  // world by the hook, become the average over the ranks still training in this pass.
  void average_over_training_ranks();
  void rebuild_buckets();
  void record_stats(Clock::time_point finish_called, Clock::time_point waited);
  void end_iteration(bool synced);
  // launch()'s comm hook failed: waits (each wait has its deadline) for what this pass
  // launched, gives back stashed gradients, and ends the pass.
  void abandon_pass();
  std::string bucket_name(size_t index) const;
  // Where the buckets' events go on the timeline (api/diagnostics/timeline.h): this rank, lane "ddp <group>".
  int timeline_rank() const;
  std::string timeline_lane() const;

  ProcessGroup& pg_;
  std::vector<GradientRef> grads_;
  ReducerOptions options_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;  // gradient -> its bucket
  std::vector<size_t> slot_of_;    // gradient -> its position in that bucket
  std::vector<bool> marked_;       // marked ready in this backward pass
  std::vector<bool> used_;         // marked in any backward since the last synchronised one
  std::vector<size_t> ready_order_;
  std::vector<Tensor> stashed_;    // bucket-view mode: local gradients zeroed while reduced
  Tensor usage_tail_;              // in the last bucket's buffer, after its gradients (or undefined)
  WorkPtr usage_work_;             // the all_gather of the flags, when they do not ride (or null)
  Tensor usage_gathered_;          // its output: every rank's flags (kMarkedThisBackward, kUsedSinceSync)
  size_t next_bucket_ = 0;
  bool sync_ = true;
  bool syncing_ = true;  // sync_ as it was when this backward pass began
  bool rebuilt_ = false;
  bool in_backward_ = false;
  Clock::time_point backward_start_;
  uint64_t iterations_ = 0;
  IterationStats stats_;
  uint64_t join_number_ = 0;  // set_joining's
  bool divide_by_training_ = false;  // set_joining's: divide by the ranks training, not the world
  bool last_failure_agreed_ = false;
  bool shadow_ = false;  // this pass is one a joined rank runs for the others
  Tensor notice_;        // the join notice of this (or the last) synchronised pass
  WorkPtr notice_work_;
};

}  // namespace ddp
}  // namespace distcomm
