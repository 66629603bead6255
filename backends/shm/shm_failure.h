// How the ranks of an shm group tell each other that the group failed.
//
// The group's own side -- its first failure, the refusal of later ops, the abort hooks --
// is api's GroupFailure (api/diagnostics/group_failure.h). What shm adds is the cross-process part:
// the first failure is written to this rank's segment (culprit, kind, message) before the
// rank's state turns kFailed, and every futex word a peer may sleep on is woken, so peers
// waiting on this rank stop within a wake-up and report the same cause and culprit. A
// clean close (no op in flight) only turns the state to kClosed: peers fail then only if
// they wait for rounds this rank will never post.
#pragma once

#include <exception>
#include <string>

#include "api/diagnostics/group_failure.h"
#include "api/work.h"
#include "backends/shm/shm_group.h"
#include "backends/shm/shm_layout.h"

namespace distcomm {
namespace shm {

struct Failure {
  FailureKind kind = FailureKind::kOther;
  int culprit = -1;  // the rank to blame, -1 when unknown
  std::string message;
  const Work* op = nullptr;  // the op that hit it, when it is not the running collective
};

// Thrown inside the engine when a group-level failure is detected; the engine records it
// and turns it into the op's error. Never leaves the plugin.
class GroupFailedError : public std::exception {
 public:
  explicit GroupFailedError(Failure f) : failure_(std::move(f)) {}
  const Failure& failure() const { return failure_; }
  const char* what() const noexcept override { return failure_.message.c_str(); }

 private:
  Failure failure_;
};

// The distcomm error for a failure: Timeout, PeerFailure or Error.
std::exception_ptr to_exception(const Failure& f);

// What rank `peer` published about its failure or close (its state is not kActive).
Failure failure_of_peer(const SegmentView& peer, int peer_rank);

// Writes the group's first failure (or a shutdown with ops in flight) to this rank's
// segment, turns its state to kFailed and wakes every sleeper on its words and every peer
// asleep on its doorbell.
void publish_failure(const MappedGroup& group, const FailureRecord& first);
// This rank shut the group down cleanly: kClosed (unless it failed first), sleepers woken.
void publish_close(const MappedGroup& group);
// After `poster` posted a round and found sleepers on it: rings the doorbell of each peer
// asleep there while it waits for that post (Doorbell::round_of).
void ring_bells_of_sleepers(const MappedGroup& group, int poster);

}  // namespace shm
}  // namespace distcomm
