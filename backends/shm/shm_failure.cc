#include "backends/shm/shm_failure.h"

#include <algorithm>
#include <cstring>

#include "api/diagnostics/launcher_stops.h"
#include "api/errors.h"
#include "backends/shm/shm_wait.h"

namespace distcomm {
namespace shm {
namespace {

FailureKind kind_of(FailureRecord::Kind k) {
  switch (k) {
    case FailureRecord::Kind::kTimeout: return FailureKind::kTimeout;
    case FailureRecord::Kind::kPeerFailure: return FailureKind::kPeerFailure;
    case FailureRecord::Kind::kShutDown: return FailureKind::kShutDown;
    case FailureRecord::Kind::kDesync: return FailureKind::kDesync;
    case FailureRecord::Kind::kInvalidArgument: return FailureKind::kInvalidArgument;
    case FailureRecord::Kind::kOther: break;
  }
  return FailureKind::kOther;
}

// Everyone who may wait on this rank: sleepers on its round line, on its doorbell (this
// rank's other thread), and on every peer's doorbell (a peer in a transfer with this rank,
// or asleep there while it waits for this rank's round).
void wake_peers(const MappedGroup& group) {
  const SegmentView& self = group.self();
  wake_all(self.control().round.wake);
  wake_all(self.control().doorbell.ring);
  for (int p = 0; p < group.size(); ++p) {
    Doorbell& bell = group.of(p).control().doorbell;
    if (p != group.rank()) publish(bell.ring, bell.sleepers);
  }
}

}  // namespace

void ring_bells_of_sleepers(const MappedGroup& group, int poster) {
  for (int p = 0; p < group.size(); ++p) {
    if (p == poster) continue;
    Doorbell& bell = group.of(p).control().doorbell;
    if (bell.round_of.load(std::memory_order_relaxed) == poster + 1) publish(bell.ring, bell.sleepers);
  }
}

std::exception_ptr to_exception(const Failure& f) {
  switch (f.kind) {
    case FailureKind::kTimeout: return std::make_exception_ptr(Timeout(f.message));
    case FailureKind::kPeerFailure:
    case FailureKind::kShutDown: return std::make_exception_ptr(PeerFailure(f.message));
    case FailureKind::kDesync: return std::make_exception_ptr(Desync(f.message));
    case FailureKind::kInvalidArgument: return std::make_exception_ptr(InvalidArgument(f.message));
    case FailureKind::kOther: break;
  }
  return std::make_exception_ptr(Error(f.message));
}

Failure peer_died(const MappedGroup& group, int peer, const std::string& how, const Work* op) {
  Failure f{FailureKind::kPeerFailure, peer, "", op};
  f.culprit_died = "rank " + std::to_string(peer) + " (pid " + std::to_string(group.pid(peer)) + ") " + how;
  f.died_too = group.others_dead(peer);
  f.message = f.culprit_died + group.dead_too_text(f.died_too);
  return f;
}

Failure with_launcher_stops(Failure f, const MappedGroup& group, const GroupFailure& failure) {
  if (f.culprit_died.empty()) return f;
  std::vector<int> dead = {f.culprit};
  dead.insert(dead.end(), f.died_too.begin(), f.died_too.end());
  const LauncherStops split = launcher_stops(failure, dead);
  if (split.stopped.empty()) return f;
  std::string others;  // the dead peers' words, those stopped left out
  if (!split.others.empty()) {
    const int lead = split.others.front();
    const std::vector<int> rest(split.others.begin() + 1, split.others.end());
    // The culprit's own words (what it was waited for in) where it was not stopped.
    others = (lead == f.culprit ? f.culprit_died
                                : "rank " + std::to_string(lead) + " (pid " + std::to_string(group.pid(lead)) +
                                      ") died: its process ended") +
             group.dead_too_text(rest);
  }
  f.message = with_launcher_stopped_text(others, split);
  // Where every dead peer was stopped (a subgroup without the failed rank), one of them
  // stands as the cause, as before the marks: a known culprit takes the group failure's
  // quick path, where -1 waited out its 1 s look for a cause (2.2 s later, a review found).
  f.culprit = split.others.empty() ? dead.front() : (split.others.size() == 1 ? split.others.front() : -1);
  return f;
}

Failure failure_of_peer(const SegmentView& peer, int peer_rank) {
  const ControlBlock& c = peer.control();
  Failure f;
  f.kind = FailureKind::kPeerFailure;
  f.culprit = peer_rank;
  const std::string who = "rank " + std::to_string(peer_rank);
  if (c.state.value.load(std::memory_order_acquire) == kClosed) {
    f.message = who + " shut the group down (ProcessGroup destroyed or aborted) before this op finished";
    return f;
  }
  // state == kFailed was read with acquire: the record written before it is complete.
  const std::string why(c.failure.message, strnlen(c.failure.message, sizeof(c.failure.message)));
  if (static_cast<FailureKind>(c.failure.kind) == FailureKind::kShutDown) {
    f.message = who + " shut the group down (ProcessGroup destroyed or aborted) while ops were in flight";
    return f;
  }
  f.kind = static_cast<FailureKind>(c.failure.kind);
  f.culprit = c.failure.culprit >= 0 ? c.failure.culprit : peer_rank;
  f.message = who + " failed: " + why;
  return f;
}

void publish_failure(const MappedGroup& group, const FailureRecord& first) {
  ControlBlock& c = group.self().control();
  c.failure.culprit = first.culprit;
  c.failure.kind = static_cast<uint32_t>(kind_of(first.kind));
  const size_t n = std::min(first.message.size(), sizeof(c.failure.message) - 1);
  std::memcpy(c.failure.message, first.message.data(), n);
  c.failure.message[n] = '\0';
  c.state.value.store(kFailed, std::memory_order_release);
  wake_peers(group);
}

void publish_close(const MappedGroup& group) {
  uint32_t active = kActive;
  group.self().state().compare_exchange_strong(active, kClosed, std::memory_order_acq_rel);
  wake_peers(group);
}

}  // namespace shm
}  // namespace distcomm
