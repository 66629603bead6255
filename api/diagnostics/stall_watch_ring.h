// The stall watch's record of the ops this rank issued (stall_watch.cc): one entry per op in
// a ring of the last StallWatch::kTracked, and the last collective, which the ring may have
// let go of. Core only, not for plugins; every member is read and written under the
// watch's lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "api/diagnostics/op_fingerprint.h"
#include "api/diagnostics/op_fingerprint_copy.h"
#include "api/diagnostics/progress_report.h"
#include "api/work.h"

namespace distcomm {
namespace internal {

struct StallWatchEntry {
  using Clock = std::chrono::steady_clock;
  OpFingerprint fingerprint;
  WorkPtr work;  // null once the op has finished and was swept (finished then says so)
  bool finished = false;
  Clock::time_point issued;
  Clock::time_point deadline = Clock::time_point::max();
  std::chrono::milliseconds timeout{0};  int64_t asked = 0;  // the request count of its early ask (timeout_window.h); -1: under way
  Clock::time_point asked_at{};  // when the early ask was made (for the words of an answer to it alone)
  Clock::time_point next_report = Clock::time_point::max();  // its next "has waited" line
};

// The last collective issued, kept apart from the ring: a rank that ran more than the
// ring's ops point to point after it (a broadcast's root, then a pipeline of sends) must
// still report it, or a peer waiting in it would take this rank's departure for one
// "before any collective". While the ring holds its entry, that entry's number (an op pays
// no second copy of its fingerprint, nor of its Work); copied out of the entry as the ring
// reuses it.
class LastCollective {
 public:
  // Before the ring's entry for op number n (the n-th issued, from 0) is written.
  void before_entry_reused(uint64_t n, const std::vector<StallWatchEntry>& ring) {
    if (in_ring_ == kNone || in_ring_ + ring.size() != n) return;
    const StallWatchEntry& e = ring[in_ring_ % ring.size()];
    if (!copy_) copy_.emplace();
    copy_fingerprint(*copy_, e.fingerprint);
    work_ = e.work;  // null once swept: finished
    in_ring_ = kNone;
  }
  // Op number n (its entry written) is a collective.
  void issued(uint64_t n) { in_ring_ = n; }

  // Into a report: the last collective and whether it has finished.
  void report(ProgressReport& r, const std::vector<StallWatchEntry>& ring) const {
    if (in_ring_ != kNone) {
      const StallWatchEntry& e = ring[in_ring_ % ring.size()];
      r.last_collective = e.fingerprint;
      r.last_collective_finished = e.finished || !e.work || e.work->is_completed();
    } else if (copy_) {
      r.last_collective = copy_;
      const WorkPtr work = work_.lock();
      r.last_collective_finished = !work || work->is_completed();
    }
  }

 private:
  static constexpr uint64_t kNone = ~uint64_t{0};
  uint64_t in_ring_ = kNone;  // its entry's op number while the ring holds it
  std::optional<OpFingerprint> copy_;  // once the ring has let go of it
  // Weak: an expired Work is one that finished and was let go.
  std::weak_ptr<Work> work_;
};

}  // namespace internal
}  // namespace distcomm
