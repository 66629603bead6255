// How an shm group fails, and how every rank learns why.
//
// The first failure a rank sees (a peer that died, a timeout, its own shutdown with ops in
// flight) is kept: later ops fail at once with it. It is also written to this rank's
// segment (culprit, kind, message) before the rank's state turns kFailed, and every futex
// word a peer may sleep on is woken, so peers waiting on this rank stop within a wake-up
// and report the same cause, naming the same culprit.
#pragma once

#include <atomic>
#include <exception>
#include <mutex>
#include <string>

#include "backends/shm/shm_layout.h"

namespace distcomm {
namespace shm {

struct Failure {
  FailureKind kind = FailureKind::kOther;
  int culprit = -1;  // the rank to blame, -1 when unknown
  std::string message;
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

class GroupFailure {
 public:
  explicit GroupFailure(const SegmentView& self) : self_(self) {}

  bool failed() const { return failed_.load(std::memory_order_acquire); }
  // Failed, or shut down on this rank: new ops are refused.
  bool refusing() const { return refusing_.load(std::memory_order_acquire); }
  // Records the group's first failure and publishes it, as "<op>: <message>" (op: the
  // description of the op that hit it); returns that op's error. Once failed, returns
  // refusal().
  std::exception_ptr record(const Failure& f, const std::string& op);
  // The error for ops issued after the failure or shutdown.
  std::exception_ptr refusal() const;
  // This rank shuts the group down: later ops are refused, and peers that wait for rounds
  // this rank will never post see kClosed and stop.
  void close();

 private:
  std::exception_ptr refusal_locked() const;

  const SegmentView self_;
  mutable std::mutex mu_;
  std::atomic<bool> failed_{false};
  std::atomic<bool> refusing_{false};
  bool closed_ = false;
  Failure first_;
};

}  // namespace shm
}  // namespace distcomm
