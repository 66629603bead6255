// One NCCL communicator: the ranks of one group (or two of them, for point to point) on
// one CUDA device, with the internal stream its ops run on. Created empty by the backend's
// registry, set up by the first op that uses it, watched by the watchdog.
//
// Locks: issue_mu_ orders setup and enqueues (ops reach NCCL in issue order; a thread
// waiting on peers holds it). It is recursive: the backend holds it across an op's setup,
// enqueue and end event (lock_issue(), op_issue.h), and these calls take it too. call_mu_ is held for each NCCL call on the handle only (NCCL's
// calls on one communicator are not thread-safe); in nonblocking mode those calls are
// short, so abort() from any thread gets it at once and aborts a communicator that is
// still being set up or is taking an op. A blocking-mode call can wait on peers for ever:
// abort() then records the reason and leaves ncclCommAbort to that call's thread, so the
// aborting thread never waits on a peer.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "api/dtype.h"
#include "api/reduce_op.h"
#include "api/store/store.h"
#include "backends/nccl/object_pool.h"
#include "backends/nccl/watchdog.h"

namespace distcomm {
namespace nccl {

class NcclComm : public WatchedComm {
 public:
  using Clock = std::chrono::steady_clock;

  struct Setup {
    Store* store = nullptr;
    std::string key;  // where rank 0 publishes the ncclUniqueId; fresh per communicator
    int rank = 0;     // in the communicator
    int size = 1;
    int device = 0;
    bool nonblocking = true;
    std::string label;  // "NCCL communicator #0 of group 'world' on cuda:0"
    // Set: made by ncclCommSplit of this communicator (a subgroup's, from its parent's;
    // same device), with this rank's color and key, instead of through a unique id.
    std::shared_ptr<NcclComm> split_from;
    int split_color = -1;
    int split_key = 0;
    // Asked while waiting for rank 0's ncclUniqueId (UniqueIdExchange::peer_failure).
    std::function<std::string()> peer_failure;
  };

  // Cheap: nothing is created until initialize().
  explicit NcclComm(Setup setup);
  // close()s it if nobody did, then frees its stream and event.
  ~NcclComm() override;
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int device() const { return setup_.device; }
  // The internal stream its ops run on (made by initialize()).
  cudaStream_t stream() const { return stream_; }
  // Events for the ends of its ops, kept for reuse (on its device).
  using EventPool = ObjectPool<cudaEvent_t>;
  const std::shared_ptr<EventPool>& event_pool() const { return events_; }
  // Holds the issue lock: what the caller does meanwhile (set up, enqueue, record the op's
  // end) no other thread's setup or op comes between.
  std::unique_lock<std::recursive_mutex> lock_issue() { return std::unique_lock<std::recursive_mutex>(issue_mu_); }
  // Set up and not aborted: ops and splits may use it.
  bool usable() const { return ready_to_close_ && !aborted_; }

  // Collective over the communicator's ranks, through each rank's first op on it (or eager
  // init): rank 0 makes the ncclUniqueId and publishes it, the others read it, all join.
  // Later calls return at once, or throw the setup's error again. A rank that does not
  // come within `timeout` makes a Timeout; abort() from another thread ends the wait.
  void initialize(std::chrono::milliseconds timeout);

  // The reduction an op uses, when it reduces.
  struct Reduction {
    ReduceOp op;
    DType dtype;
  };
  using Calls = std::function<ncclResult_t(ncclComm_t comm, ncclRedOp_t redop, cudaStream_t stream)>;

  // Issues `calls` (NCCL calls on this communicator and the stream given; returns the
  // first failure) after the work queued so far on `caller` (a stream of this device),
  // between ncclGroupStart and ncclGroupEnd, and waits until NCCL has taken them: the op
  // then runs on stream(). With a reduction, `redop` is its NCCL op (PREMUL_SUM is made
  // for the call and released after). Throws NCCL's error; past the deadline aborts the
  // communicator and throws Timeout.
  void enqueue(const std::string& what, cudaStream_t caller, const Calls& calls, Clock::time_point deadline,
               const Reduction* reduction = nullptr);

  // The calls one op makes on one communicator, as part of a grouped enqueue.
  struct Part {
    NcclComm* comm;
    Calls calls;
    const Reduction* reduction = nullptr;
  };
  // enqueue() of several communicators of one device (set up; a batch's pairs) in one
  // ncclGroupStart/ncclGroupEnd, each part on its communicator's stream. Their locks are
  // taken in the parts' order (CommSet's, pair_setup_order).
  static void enqueue_together(const std::string& what, cudaStream_t caller, const std::vector<Part>& parts,
                               Clock::time_point deadline);

  // ncclCommSplit: collective over this communicator (every rank calls it, in the same
  // order as its ops on it). Returns the new communicator of this rank's color, set up, or
  // nullptr for NCCL_SPLIT_NOCOLOR. Throws as enqueue() does; past the deadline this
  // communicator is aborted (which also ends NCCL's split) and Timeout thrown.
  ncclComm_t split(int color, int key, const std::string& what, Clock::time_point deadline);

  // Ends the communicator when no op of it is in flight: finalize (flushes this rank's
  // work, polled until the deadline) and destroy; abort when that fails or when it was
  // never set up (with `why` as the abort's reason). Idempotent, from any thread; ops
  // issued afterwards fail.
  void close(Clock::time_point deadline, const std::string& why);

  // WatchedComm. async_error() is null once aborted: its ops then fail on abort_reason().
  std::exception_ptr async_error() override;
  void abort(const std::string& reason) override;
  std::string abort_reason() const override;
  std::string label() const override { return setup_.label; }

 private:
  struct Settled;
  // Waits while r is ncclInProgress, until the deadline or an abort.
  Settled settle(ncclResult_t r, Clock::time_point deadline);
  // The handle of a new communicator: from split_from, or through the unique id exchange.
  ncclResult_t create_handle(const std::string& setting_up, Clock::time_point deadline);
  // Keeps the first abort reason, then raises aborted_.
  void keep_reason(const std::string& reason);
  // With call_mu_ held: ncclCommAbort once, if abort() was asked for.
  void abort_if_asked();
  // With call_mu_ held: ncclCommAbort now.
  void abort_handle();
  [[noreturn]] void throw_aborted(const std::string& what) const;

  const Setup setup_;

  std::recursive_mutex issue_mu_;
  bool set_up_ = false;          // under issue_mu_
  std::exception_ptr setup_error_;  // under issue_mu_
  cudaStream_t stream_ = nullptr;   // made by initialize(), freed by the destructor
  cudaEvent_t ready_ = nullptr;     // orders stream_ behind callers' streams
  const std::shared_ptr<EventPool> events_;
  std::atomic<bool> ready_to_close_{false};  // set up, so close() may finalize

  std::timed_mutex call_mu_;
  ncclComm_t comm_ = nullptr;  // under call_mu_; null before setup and once closed
  // Where a nonblocking ncclCommSplit puts the new handle when it completes (NCCL's thread
  // writes it then); read under call_mu_ once this communicator's state is no longer
  // ncclInProgress. A member, not a local: an abort may end split() before NCCL has.
  ncclComm_t split_child_ = nullptr;
  bool closed_ = false;        // under call_mu_

  mutable std::mutex reason_mu_;
  std::string abort_reason_;
  std::atomic<bool> aborted_{false};
};

}  // namespace nccl
}  // namespace distcomm
