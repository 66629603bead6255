// FlightRecorder: the last N ops of one group, with their states and times, for dumps
// (trace_dump.h) and the timeline (timeline.h).
//
// Every op goes through the ProcessGroup, so every backend -- gloo, mpi, nccl, shm and a
// third-party plugin -- is recorded without a line of its own. An op's description is
// its OpFingerprint (op, seq, dtype, count, shape, root, reduction, peer, tag), the same
// one the ranks compare for mismatches, so a dump's ops can be compared across ranks by
// the same rules.
//
// States: queued (issued), started, completed or failed (with the error's type and
// message). Ops on one group run in the order they were issued (backend.h), so a
// collective starts when it was issued or when the collective before it ended, whichever
// is later: that is what "started" records, derived here so that no backend has to say
// it. Point-to-point ops progress side by side and start when issued.
//
// Cost per op (measured in docs/failures.md, "Debugging a hung or slow job"): two
// uncontended locks and a copy of the fingerprint into a preallocated slot at issue, one
// lock at completion, a callback on the Work (none for an op whose Work has ended by the time
// it is watched: it is recorded as ended at once).
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "api/diagnostics/op_fingerprint.h"
#include "api/work.h"

namespace distcomm {

struct TraceEntry {
  enum class State : uint8_t { kQueued, kStarted, kCompleted, kFailed };
  uint64_t id = 0;  // the op's ordinal in this group's recorder (all kinds of ops)
  OpFingerprint fingerprint;
  State state = State::kQueued;
  // Wall-clock nanoseconds (FailureReport::now_ns): comparable between the ranks of one
  // machine, and between machines as far as their clocks agree.
  int64_t queued_ns = 0;
  int64_t started_ns = 0;  // 0 while queued
  int64_t ended_ns = 0;    // 0 until completed or failed
  std::string error;       // failed: "distcomm::Timeout: ..."
};
const char* trace_state_name(TraceEntry::State s);  // "queued", "started", ...

// What a dump says about the group besides its ops.
struct TraceGroupInfo {
  std::string name;
  int rank = 0;
  int size = 1;
  std::vector<int> global_ranks;
  std::string backend;                // the spec: "gloo", "auto (cpu: shm)"
  std::vector<std::string> versions;  // "gloo: gloo 0.5.0 (tcp)", one per backend
};

class FlightRecorder : public std::enable_shared_from_this<FlightRecorder> {
 public:
  // What a group keeps unless DISTCOMM_TRACE_BUFFER says otherwise (TraceSettings, in
  // process_environment.h; 0 turns recording off).
  static constexpr size_t kDefaultCapacity = 2000;

  explicit FlightRecorder(size_t capacity);

  void set_info(TraceGroupInfo info);
  TraceGroupInfo info() const;

  // An op about to go to its backend; returns its id for watch() / failed_to_issue().
  uint64_t queued(const OpFingerprint& fingerprint);
  // The op's Work: its end is recorded when it finishes.
  void watch(uint64_t id, const WorkPtr& work);
  // The backend refused the op before returning a Work.
  void failed_to_issue(uint64_t id, std::exception_ptr error);
  // Called with the error of each watched op that fails (before the ring is looked at), so
  // that the group's own note of its first failure rides on the recorder's callback and
  // costs an op no second one. Set once, before any op is issued.
  void set_failure_note(std::function<void(const std::exception_ptr&)> note) { failure_note_ = std::move(note); }

  // Called with each op as it ends (after the recorder's own lock is released): the
  // dumps' "on failure" trigger and the timeline's events. One per process. every_op
  // false: failed ops only (a successful op then costs no copy).
  using EndListener = void (*)(const FlightRecorder& recorder, const TraceEntry& entry);
  static void set_end_listener(EndListener listener, bool every_op);

  // The ops held now, oldest first, and how many older ones the ring has dropped.
  std::vector<TraceEntry> snapshot(uint64_t* dropped = nullptr) const;
  size_t capacity() const { return ring_.size(); }

 private:
  void ended(uint64_t id, std::exception_ptr error);
  TraceEntry* slot(uint64_t id);  // null once the ring has reused it

  mutable std::mutex mu_;
  std::vector<TraceEntry> ring_;
  uint64_t next_id_ = 0;
  // The last collective issued, whose end starts the next one (kNone: none in the ring).
  static constexpr uint64_t kNone = ~uint64_t{0};
  uint64_t last_collective_ = kNone;
  std::vector<uint64_t> next_collective_;  // per slot: the collective issued after it
  TraceGroupInfo info_;
  // Last, so that the members before it keep their offsets (capacity() is inline).
  std::function<void(const std::exception_ptr&)> failure_note_;
};

}  // namespace distcomm
