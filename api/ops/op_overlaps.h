// Issue order for the list forms (ProcessGroup's ops, process_group_ops.cc).
//
// A group's ops run one at a time in issue order (docs/backends.md). The flat ops keep that
// by themselves: the backend reads and writes the caller's tensors when the op runs. A list
// form on host tensors does not: it packs its inputs when it is issued (the host cannot
// pack at the backend's run time within the plugin ABI) and writes its outputs back when
// its flat op ends. So, without more, a list op read tensors that an earlier op of the
// group, still in flight, had not written yet, and a later op read (or wrote) tensors that
// an earlier list op had not written back yet. Deferring the issue would reorder ops across
// ranks; instead the issuing thread waits, and only where memory overlaps:
//
// - before a list op packs its inputs: for the group's earlier ops in flight whose outputs
//   (or write-back targets) overlap them (wait_for_writers);
// - before any op is issued: for the group's earlier list ops whose write-back targets
//   overlap the op's tensors (wait_for_write_backs). While no write-back is in flight that
//   is one atomic load.
//
// Every op on host tensors records its output's byte range with its Work (record_output):
// a mutex, a WorkPtr copy, and now and then a scan that drops ended entries (an op that has
// ended by then is counted, not kept, and while nothing is kept costs one atomic load): once the
// entries reach twice what the last scan kept (at least kCapacity), so that the scans cost
// O(1) an op on average even while thousands of ops stay in flight (a scan at every op
// past kCapacity made posting n recvs O(n^2): 8000 took 2-8 s). The entries stay under
// twice what was in flight at the last scan (after a burst of 5000, up to 10000 ended ones
// until the next scan).
// Waiting ignores the earlier op's error: its own Work reports it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "api/tensor.h"
#include "api/work.h"

namespace distcomm {

// [begin, end) of a host tensor's bytes; empty (begin == end) for device and empty tensors.
struct ByteRange {
  uintptr_t begin = 0;
  uintptr_t end = 0;
  static ByteRange of(const Tensor& t) {
    if (!t.is_cpu() || t.nbytes() == 0 || t.data() == nullptr) return {};
    const auto b = reinterpret_cast<uintptr_t>(t.data());
    return {b, b + t.nbytes()};
  }
  bool empty() const { return begin == end; }
  bool overlaps(const ByteRange& o) const { return !empty() && !o.empty() && begin < o.end && o.begin < end; }
};

// Set on this thread while a list op issues its flat op over a buffer of the pool: the
// group's record of what ops write keeps the list's own tensors (its write-back), not the
// pool's.
class ScratchOutput {
 public:
  ScratchOutput() { set(true); }
  ~ScratchOutput() { set(false); }
  ScratchOutput(const ScratchOutput&) = delete;
  ScratchOutput& operator=(const ScratchOutput&) = delete;
  static bool active();

 private:
  static void set(bool on);
};

class OpOverlaps {
 public:
  // Kept without a scan until this many ops are recorded.
  static constexpr size_t kCapacity = 8;

  // An op on host tensors was issued: `work` writes `output` until it ends.
  void record_output(const WorkPtr& work, const Tensor& output);
  // A list op was issued: `work` (its unpacking step's) writes `targets` when it ends.
  void record_write_back(const WorkPtr& work, const std::vector<Tensor>& targets);
  void record_write_back(const WorkPtr& work, const Tensor& target);

  // How many recorded entries the scans of record_output have looked at (for tests: the
  // count grows linearly with the ops recorded, however many are in flight).
  size_t output_entries_scanned() {
    std::lock_guard<std::mutex> lock(mu_);
    return output_entries_scanned_;
  }

  // Before packing `inputs`: waits for earlier ops whose outputs or write-backs overlap them.
  void wait_for_writers(const std::vector<Tensor>& inputs);
  // Before issuing an op on these tensors: waits for earlier list ops whose write-backs
  // overlap any of them. Free while none is in flight.
  void wait_for_write_backs(const Tensor* a, const Tensor* b = nullptr) {
    if (write_backs_->load(std::memory_order_acquire) == 0) return;
    wait_for_write_backs_slow(a, b);
  }
  void wait_for_write_backs(const std::vector<Tensor>& tensors) {
    if (write_backs_->load(std::memory_order_acquire) == 0) return;
    for (const Tensor& t : tensors) wait_for_write_backs_slow(&t, nullptr);
  }

 private:
  struct Entry {
    WorkPtr work;
    ByteRange range;
  };
  void wait_for_write_backs_slow(const Tensor* a, const Tensor* b);
  static void wait_quietly(const std::vector<WorkPtr>& works);

  std::mutex mu_;
  std::vector<Entry> outputs_;     // recent ops and what they write (ended ones dropped lazily)
  std::atomic<size_t> outputs_held_{0};  // outputs_.size(), for record_output's look without the lock
  size_t ended_not_kept_ = 0;  // under mu_: ended ops recorded (not kept) since the last scan
  size_t scan_outputs_at_ = kCapacity;  // outputs_'s size at which the next scan drops ended ones
  size_t output_entries_scanned_ = 0;     // under mu_
  std::vector<Entry> write_backs_list_;  // list ops whose write-back has not ended
  // How many write-backs have not ended (each decrements it as it ends): the fast path.
  std::shared_ptr<std::atomic<int64_t>> write_backs_ = std::make_shared<std::atomic<int64_t>>(0);
};

}  // namespace distcomm
