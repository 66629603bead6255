// The nccl backend's watchdog: one thread per backend that follows every op in flight
// until it ends.
//
// A GPU collective whose peer died or never arrived does not end by itself: the kernel
// spins. Only ncclCommAbort frees it, so something on the host has to notice. The watchdog
// polls each op (its end event), each communicator (ncclCommGetAsyncError) and each op's
// deadline; on the first fault it aborts every communicator with ops in flight and fails
// those ops, so no rank hangs after a peer dies. The backend is then poisoned with that
// first fault (on_fault) and fails later ops at once.
//
// It knows ops and communicators only through the two small interfaces below, so its
// logic (deadlines, fault fan-out, completion order) is tested on machines without a GPU.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace distcomm {
namespace nccl {

// An op in flight, as the watchdog sees it.
class TrackedOp {
 public:
  enum class Poll { kRunning, kDone, kFailed };
  virtual ~TrackedOp() = default;
  // Whether the op has ended; kFailed puts the reason in *error (a CUDA error).
  virtual Poll poll(std::string* error) = 0;
  // Ends the op (nullptr: success). May be called more than once (the op may also have
  // ended itself, e.g. in a blocking wait): only the first call counts.
  virtual void complete(std::exception_ptr error) = 0;
  // Names op, sequence number and rank: "all_reduce #12 on rank 1/4 of group 'world' (cuda:0)".
  virtual std::string label() const = 0;
};

// A communicator the watchdog can question and abort.
class WatchedComm {
 public:
  virtual ~WatchedComm() = default;
  // "" while healthy, else what went wrong (ncclCommGetAsyncError and ncclGetLastError).
  virtual std::string async_error() = 0;
  // ncclCommAbort: frees kernels stuck on this communicator. Idempotent.
  virtual void abort() = 0;
  virtual std::string label() const = 0;  // "communicator #0 of group 'world' on cuda:0"
};

class Watchdog {
 public:
  using Clock = std::chrono::steady_clock;

  // on_fault runs once, on the watchdog thread, with the first fault. poll_interval is how
  // often ops in flight are checked (the thread sleeps while none are).
  Watchdog(std::function<void(std::exception_ptr)> on_fault, std::chrono::microseconds poll_interval);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Follows op until it ends. timeout is reported in the message when the deadline passes.
  // After a fault, the op fails at once with that fault.
  void track(std::shared_ptr<WatchedComm> comm, std::shared_ptr<TrackedOp> op,
             std::chrono::milliseconds timeout);

  // Stops the thread. Ops still in flight have their communicators aborted and fail with
  // PeerFailure(why). Idempotent; the destructor calls it.
  void stop(const std::string& why);

  size_t in_flight() const;
  // The first fault, or nullptr.
  std::exception_ptr fault() const;

 private:
  struct Entry {
    std::shared_ptr<WatchedComm> comm;
    std::shared_ptr<TrackedOp> op;
    Clock::time_point deadline;
    std::chrono::milliseconds timeout;
  };

  void run();
  // One pass over the ops in flight: finishes ended ones, detects faults.
  void check_once();
  // Aborts every communicator in `entries` and fails their ops: `culprit` (if any) with
  // `error`, the others with a PeerFailure that points at it.
  void fail_all(std::vector<Entry> entries, const Entry* culprit, std::exception_ptr error);

  const std::function<void(std::exception_ptr)> on_fault_;
  const std::chrono::microseconds poll_interval_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Entry> entries_;  // in issue order
  std::exception_ptr fault_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace nccl
}  // namespace distcomm
