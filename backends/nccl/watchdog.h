// The nccl backend's watchdog: one thread per backend that follows every op in flight
// until it ends, and the one way by which a fault reaches the group's GroupFailure.
//
// A GPU collective whose peer died or never arrived does not end by itself: the kernel
// spins. Only ncclCommAbort frees it, so something on the host has to notice. The watchdog
// polls each op (its end event), each communicator (ncclCommGetAsyncError) and each op's
// deadline. A fault, found here or reported by the issuing thread (fail()), is handled in
// one order: GroupFailure records it if it is the first (later ops are refused from then
// on) and runs the group's abort hooks, among them the watchdog's own, which aborts every
// communicator of the backend -- the failing one first, all of them concurrently and for a
// bounded time (concurrent_abort.h: one abort may wait for another); then the
// communicators of the ops in flight are aborted, the same way (each keeps the reason
// before ncclCommAbort, so an op whose end event passes because of the abort can tell),
// then those ops fail.
//
// It knows ops and communicators only through the two small interfaces below, so its
// logic (deadlines, fault fan-out, completion order) is tested on machines without a GPU.
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "api/diagnostics/group_failure.h"
#include "api/work.h"

namespace distcomm {
namespace nccl {

// An op in flight, as the watchdog sees it.
class TrackedOp {
 public:
  enum class Poll { kRunning, kDone, kFailed };
  virtual ~TrackedOp() = default;
  // Whether the op has ended; kFailed puts the error in *error. Called on the watchdog
  // thread only.
  virtual Poll poll(std::exception_ptr* error) = 0;
  // Ends the op (nullptr: success). May be called more than once (the op may also have
  // ended itself, e.g. in a blocking wait): only the first call counts.
  virtual void complete(std::exception_ptr error) = 0;
  // Names op, sequence number and rank: "all_reduce #12 on rank 1/4 of group 'world' (cuda:0)".
  virtual std::string label() const = 0;
  // The op's Work, for the failure record (op and sequence number), if it is one.
  virtual const Work* work() const { return nullptr; }
};

// A communicator the watchdog can question and abort.
class WatchedComm {
 public:
  virtual ~WatchedComm() = default;
  // Null while healthy, else what went wrong (ncclCommGetAsyncError and ncclGetLastError)
  // as the error it is: PeerFailure when NCCL blames a peer or the network, Error for a
  // failure on this rank (cuda_status.h). Called on the watchdog thread only.
  virtual std::exception_ptr async_error() = 0;
  // ncclCommAbort: frees kernels stuck on this communicator. Keeps `reason` first, so that
  // abort_reason() says so before any kernel can end because of the abort. Idempotent:
  // the first reason stays.
  virtual void abort(const std::string& reason) = 0;
  // "" until abort() was called, then its reason.
  virtual std::string abort_reason() const = 0;
  virtual std::string label() const = 0;  // "communicator #0 of group 'world' on cuda:0"
};

class Watchdog {
 public:
  using Clock = std::chrono::steady_clock;

  // Every communicator of the backend (its registry), set up or not.
  using CommList = std::function<std::vector<std::shared_ptr<WatchedComm>>()>;

  // failure: the group's, shared with the backend (the thread may outlive the backend).
  // poll_interval: how often ops in flight are checked (the thread sleeps while none are).
  // all_comms: what the group's first failure aborts besides the communicators of the ops
  // in flight (GroupFailure's abort hook, which the watchdog adds here). abort_bound: how
  // long a fault waits for those aborts before it goes on (an abort left running is logged).
  Watchdog(std::shared_ptr<GroupFailure> failure, std::chrono::microseconds poll_interval, CommList all_comms = {},
           std::chrono::milliseconds abort_bound = std::chrono::milliseconds(10000));
  // Stops the thread (see stop()). Safe on the watchdog thread itself, from a Work callback
  // that destroys the group: the thread then finishes alone, touching only state it owns.
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Follows op until it ends. A timeout of zero or less means no deadline. After a fault
  // or stop(), the op fails at once and its communicator is aborted.
  void track(std::shared_ptr<WatchedComm> comm, std::shared_ptr<TrackedOp> op, std::chrono::milliseconds timeout);

  // A fault the issuing thread found in op (a setup that failed, an op NCCL refused or did
  // not take in time): handled as the watchdog's own, in the order above; comm (may be
  // null) is aborted with the others. Returns what op must end with (GroupFailure::record).
  std::exception_ptr fail(std::exception_ptr error, std::shared_ptr<WatchedComm> comm, const TrackedOp& op);

  // Waits until no op is in flight, for at most until `deadline`. False if some are left,
  // and at once on the watchdog thread (it cannot wait for itself).
  bool drain(Clock::time_point deadline);

  // Stops the thread. Ops still in flight have their communicators aborted and fail with
  // PeerFailure(why). Idempotent.
  void stop(const std::string& why);

  size_t in_flight() const;

 private:
  struct Core;  // shared with the thread, so that it outlives a Watchdog destroyed under it
  std::shared_ptr<Core> core_;
  std::thread thread_;
};

}  // namespace nccl
}  // namespace distcomm
