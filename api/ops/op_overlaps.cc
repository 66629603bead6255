#include "api/ops/op_overlaps.h"

#include <algorithm>

namespace distcomm {
namespace {

// Drops the entries whose op has ended (ended ones are not waited for). Work's own
// is_completed, not the backend's: a backend's poll may act on it (gloo's hands the op to its
// worker, as nobody is about to wait() for it), and this look is nobody's poll.
template <typename Entries>
void drop_ended(Entries& entries) {
  entries.erase(
      std::remove_if(entries.begin(), entries.end(), [](const auto& e) { return e.work->Work::is_completed(); }),
      entries.end());
}

thread_local bool t_scratch_output = false;

}  // namespace

bool ScratchOutput::active() { return t_scratch_output; }
void ScratchOutput::set(bool on) { t_scratch_output = on; }

void OpOverlaps::record_output(const WorkPtr& work, const Tensor& output) {
  if (!work) return;
  // An op that has ended (within its backend's call) writes nothing more: nothing waits for
  // it, and a scan would drop it at once (drop_ended), so it is not kept. While nothing is
  // kept, that costs no lock; otherwise it counts towards the next scan as a kept one would,
  // so that the ops after a burst still drive the scans that drop the burst's ended entries.
  const bool ended = work->Work::is_completed();
  if (ended && outputs_held_.load(std::memory_order_relaxed) == 0) return;
  const ByteRange range = ByteRange::of(output);
  if (range.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (outputs_.size() + ended_not_kept_ >= scan_outputs_at_) {
    output_entries_scanned_ += outputs_.size();
    drop_ended(outputs_);
    ended_not_kept_ = 0;
    // What stays is in flight: scanned again only after as many more ops are recorded.
    scan_outputs_at_ = std::max(kCapacity, 2 * outputs_.size());
  }
  if (ended) {
    ++ended_not_kept_;
  } else {
    outputs_.push_back({work, range});
  }
  outputs_held_.store(outputs_.size(), std::memory_order_relaxed);
}

void OpOverlaps::record_write_back(const WorkPtr& work, const Tensor& target) {
  record_write_back(work, std::vector<Tensor>{target});
}

void OpOverlaps::record_write_back(const WorkPtr& work, const std::vector<Tensor>& targets) {
  if (!work) return;
  bool any = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Tensor& t : targets) {
      const ByteRange range = ByteRange::of(t);
      if (range.empty()) continue;
      write_backs_list_.push_back({work, range});
      any = true;
    }
  }
  if (!any) return;
  // Counted until it ends (on_finish runs at once where it has ended already).
  write_backs_->fetch_add(1, std::memory_order_acq_rel);
  work->on_finish([count = write_backs_](std::exception_ptr) { count->fetch_sub(1, std::memory_order_acq_rel); });
}

void OpOverlaps::wait_for_writers(const std::vector<Tensor>& inputs) {
  std::vector<WorkPtr> earlier;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (outputs_.empty() && write_backs_list_.empty()) return;
    for (const Tensor& t : inputs) {
      const ByteRange range = ByteRange::of(t);
      if (range.empty()) continue;
      for (const auto* entries : {&outputs_, &write_backs_list_}) {
        for (const Entry& e : *entries) {
          if (e.range.overlaps(range)) earlier.push_back(e.work);
        }
      }
    }
  }
  wait_quietly(earlier);
}

void OpOverlaps::wait_for_write_backs_slow(const Tensor* a, const Tensor* b) {
  std::vector<WorkPtr> earlier;
  {
    std::lock_guard<std::mutex> lock(mu_);
    drop_ended(write_backs_list_);
    for (const Tensor* t : {a, b}) {
      if (!t) continue;
      const ByteRange range = ByteRange::of(*t);
      for (const Entry& e : write_backs_list_) {
        if (e.range.overlaps(range)) earlier.push_back(e.work);
      }
    }
  }
  wait_quietly(earlier);
}

void OpOverlaps::wait_quietly(const std::vector<WorkPtr>& works) {
  for (const WorkPtr& w : works) {
    try {
      w->wait();
    } catch (...) {
      // Its own Work reports the error to whoever waits for it; a failure of the group
      // refuses the op about to be issued.
    }
  }
}

}  // namespace distcomm
