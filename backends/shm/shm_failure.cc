#include "backends/shm/shm_failure.h"

#include <algorithm>
#include <cstring>

#include "api/errors.h"
#include "backends/shm/shm_wait.h"

namespace distcomm {
namespace shm {

std::exception_ptr to_exception(const Failure& f) {
  switch (f.kind) {
    case FailureKind::kTimeout: return std::make_exception_ptr(Timeout(f.message));
    case FailureKind::kPeerFailure: return std::make_exception_ptr(PeerFailure(f.message));
    case FailureKind::kOther: break;
  }
  return std::make_exception_ptr(Error(f.message));
}

Failure failure_of_peer(const SegmentView& peer, int peer_rank) {
  const ControlBlock& c = peer.control();
  Failure f;
  f.kind = FailureKind::kPeerFailure;
  f.culprit = peer_rank;
  if (c.round.state.load(std::memory_order_acquire) == kClosed) {
    f.message = "rank " + std::to_string(peer_rank) +
                " shut the group down (ProcessGroup destroyed or aborted) before this op finished";
    return f;
  }
  // state == kFailed was read with acquire: the record written before it is complete.
  const size_t n = strnlen(c.failure.message, sizeof(c.failure.message));
  f.kind = static_cast<FailureKind>(c.failure.kind);
  f.culprit = c.failure.culprit;
  f.message = "rank " + std::to_string(peer_rank) + " failed: " + std::string(c.failure.message, n);
  return f;
}

std::exception_ptr GroupFailure::record(const Failure& f, const std::string& op) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_.load(std::memory_order_relaxed)) return refusal_locked();
    first_ = f;
    if (!op.empty()) first_.message = op + ": " + f.message;
    ControlBlock& c = self_.control();
    c.failure.culprit = f.culprit;
    c.failure.kind = static_cast<uint32_t>(f.kind);
    const size_t n = std::min(first_.message.size(), sizeof(c.failure.message) - 1);
    std::memcpy(c.failure.message, first_.message.data(), n);
    c.failure.message[n] = '\0';
    c.round.state.store(kFailed, std::memory_order_release);
    failed_.store(true, std::memory_order_release);
    refusing_.store(true, std::memory_order_release);
  }
  wake_all(self_.control().round.wake);
  wake_all(self_.control().doorbell.ring);
  return to_exception(f);
}

std::exception_ptr GroupFailure::refusal() const {
  std::lock_guard<std::mutex> lock(mu_);
  return refusal_locked();
}

std::exception_ptr GroupFailure::refusal_locked() const {
  if (closed_ && !failed_.load(std::memory_order_relaxed)) {
    return std::make_exception_ptr(
        PeerFailure("the group was shut down on this rank (ProcessGroup::abort or destruction)"));
  }
  Failure f = first_;
  f.message = "the group is unusable since an earlier failure; create a new group. First failure: " + f.message;
  return to_exception(f);
}

void GroupFailure::close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
    closed_ = true;
    refusing_.store(true, std::memory_order_release);
    if (!failed_.load(std::memory_order_relaxed)) {
      self_.control().round.state.store(kClosed, std::memory_order_release);
    }
  }
  wake_all(self_.control().round.wake);
  wake_all(self_.control().doorbell.ring);
}

}  // namespace shm
}  // namespace distcomm
