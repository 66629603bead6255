#include "api/diagnostics/flight_recorder.h"

#include <algorithm>
#include <atomic>
#include <optional>

#include "api/diagnostics/op_fingerprint_copy.h"
#include "api/errors.h"
#include "api/process/failure_report.h"
#include "api/run_main.h"

namespace distcomm {
namespace {

std::atomic<FlightRecorder::EndListener> g_listener{nullptr};
std::atomic<bool> g_listen_every_op{false};

}  // namespace

const char* trace_state_name(TraceEntry::State s) {
  switch (s) {
    case TraceEntry::State::kQueued: return "queued";
    case TraceEntry::State::kStarted: return "started";
    case TraceEntry::State::kCompleted: return "completed";
    case TraceEntry::State::kFailed: return "failed";
  }
  return "?";
}

FlightRecorder::FlightRecorder(size_t capacity) : ring_(capacity), next_collective_(capacity, kNone) {}

void FlightRecorder::set_info(TraceGroupInfo info) {
  std::lock_guard<std::mutex> lock(mu_);
  info_ = std::move(info);
}

TraceGroupInfo FlightRecorder::info() const {
  std::lock_guard<std::mutex> lock(mu_);
  return info_;
}

void FlightRecorder::set_end_listener(EndListener listener, bool every_op) {
  g_listen_every_op.store(every_op);
  g_listener.store(listener);
}

TraceEntry* FlightRecorder::slot(uint64_t id) {
  TraceEntry& e = ring_[id % ring_.size()];
  return e.id == id ? &e : nullptr;
}

uint64_t FlightRecorder::queued(const OpFingerprint& fingerprint) {
  const int64_t now = FailureReport::now_ns();
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t id = next_id_++;
  const size_t index = id % ring_.size();
  TraceEntry& e = ring_[index];
  e.id = id;
  internal::copy_fingerprint(e.fingerprint, fingerprint);  // into the slot: its vectors keep their capacity
  e.queued_ns = now;
  e.ended_ns = 0;
  e.error.clear();
  next_collective_[index] = kNone;
  if (fingerprint.p2p) {
    e.state = TraceEntry::State::kStarted;
    e.started_ns = now;
    return id;
  }
  const TraceEntry* before = last_collective_ == kNone ? nullptr : slot(last_collective_);
  if (before && before->ended_ns == 0) {
    e.state = TraceEntry::State::kQueued;  // started by the end of `before`
    e.started_ns = 0;
    next_collective_[last_collective_ % ring_.size()] = id;
  } else {
    e.state = TraceEntry::State::kStarted;
    e.started_ns = now;
  }
  last_collective_ = id;
  return id;
}

void FlightRecorder::watch(uint64_t id, const WorkPtr& work) {
  // An op that has ended already (within its backend's call) is recorded here, on this
  // thread, as on_finish would run the callback here: no callback to make (it allocates).
  // Work's own is_completed, not a backend's poll, which may act on the op.
  if (work->Work::is_completed()) {
    const std::exception_ptr error = work->Work::exception();
    if (error && failure_note_) failure_note_(error);
    ended(id, error);
    return;
  }
  // The recorder lives as long as a Work that may still end (the group may go first).
  work->on_finish([self = shared_from_this(), id](std::exception_ptr error) {
    if (error && self->failure_note_) self->failure_note_(error);
    self->ended(id, error);
  });
}

void FlightRecorder::failed_to_issue(uint64_t id, std::exception_ptr error) { ended(id, error); }

void FlightRecorder::ended(uint64_t id, std::exception_ptr error) {
  const int64_t now = FailureReport::now_ns();
  // The error's text is built outside the lock (it may be long).
  std::string error_text = error ? type_and_message(error) : std::string();
  const EndListener listener = g_listener.load();
  const bool tell = listener && (error || g_listen_every_op.load(std::memory_order_relaxed));
  std::optional<TraceEntry> copy;  // built only where a listener is told
  {
    std::lock_guard<std::mutex> lock(mu_);
    TraceEntry* e = slot(id);
    if (!e) return;  // pushed out of the ring while it ran
    if (e->started_ns == 0) e->started_ns = now;
    e->ended_ns = now;
    e->state = error ? TraceEntry::State::kFailed : TraceEntry::State::kCompleted;
    e->error = std::move(error_text);
    const uint64_t next = next_collective_[id % ring_.size()];
    if (next != kNone) {
      TraceEntry* n = slot(next);
      if (n && n->state == TraceEntry::State::kQueued) {
        n->state = TraceEntry::State::kStarted;
        n->started_ns = now;
      }
    }
    if (tell) copy.emplace(*e);
  }
  if (copy) listener(*this, *copy);
}

std::vector<TraceEntry> FlightRecorder::snapshot(uint64_t* dropped) const {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t held = std::min<uint64_t>(next_id_, ring_.size());
  if (dropped) *dropped = next_id_ - held;
  std::vector<TraceEntry> out;
  out.reserve(held);
  for (uint64_t id = next_id_ - held; id < next_id_; ++id) out.push_back(ring_[id % ring_.size()]);
  return out;
}

}  // namespace distcomm
