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
#include <vector>

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
  // For a peer whose process ended (peer_died): its own words ("rank 3 (pid 8) died: ..."),
  // and the other peers found ended with it. Kept apart so that those their launcher
  // stopped can be named apart before the failure is recorded (with_launcher_stops).
  std::string culprit_died{};  // "" for every other failure
  std::vector<int> died_too{};
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

// The failure for rank `peer`, whose process ended: "rank 3 (pid 8) <how>", then the other
// peers found ended with it ("; rank 2 (pid 7) has died too"). culprit: peer.
Failure peer_died(const MappedGroup& group, int peer, const std::string& how, const Work* op = nullptr);

// f as it is, unless some of the peers it names dead (peer_died) were stopped by their
// launcher because another rank failed (launcher_stops(), group_failure.h: tools/launch
// stops a failed rank's machine-mates, and a survivor in another launcher sees them end as
// if each had died): then those are named apart, not as culprits, in the words every
// backend uses (api/diagnostics/launcher_stops.h): "rank 4 (pid 9) died: its process ended
// ...; ranks [3, 5] were stopped by their launcher after rank 4 failed (...), not failing
// themselves". The culprit is then the one other dead peer; where every one was stopped, the
// one stopped peer; else -1 (GroupFailure looks up the board, and asks where the ranks are).
// One read of the job's store (bounded, launcher_stops.cc), so only on a failure's path.
Failure with_launcher_stops(Failure f, const MappedGroup& group, const GroupFailure& failure);

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
