// Work: the handle of one asynchronous operation.
//
// Every ProcessGroup op returns a Work at once; the backend finishes it from its own
// thread. Blocking use is `pg.all_reduce(t)->wait()`.
#pragma once

#include "api/language_standard.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "api/timeouts.h"

struct CUstream_st;  // cudaStream_t, for wait(stream)

namespace distcomm {

enum class OpType : uint8_t {
  kAllReduce,
  kAllReduceCoalesced,
  kBroadcast,
  kReduce,
  kAllGather,
  kGather,
  kScatter,
  kReduceScatter,
  kAllToAll,
  kBarrier,
  kSend,
  kRecv,
  kRecvAnySource,
  kBatchP2P,  // ProcessGroup::batch_isend_irecv
};
const char* op_type_name(OpType op);  // "all_reduce", ...

class Work {
 public:
  using Clock = std::chrono::steady_clock;

  // description: "rank 1/4 group 'world' all_reduce #12", put before error messages.
  Work(OpType op, uint64_t seq, std::string description = "");
  virtual ~Work();
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  // Blocks until the op ends. Rethrows the op's error. With a timeout (not kUseDefault),
  // throws Timeout if the op has not ended by then (the op itself goes on; the group's
  // timeout aborts it).
  virtual void wait(std::chrono::milliseconds timeout = kUseDefault);
  // An op on CUDA tensors: makes `stream` (nullptr: the legacy default stream) wait for the
  // op, rather than the stream it was issued on, and returns without blocking the host;
  // throws the error of an op that has failed. Any other op: wait(). It is wait() with
  // `stream` as the thread's current CUDA stream (api/cuda_stream.h), so it is not virtual.
  void wait(CUstream_st* stream);
  virtual bool is_completed() const;
  bool is_success() const;  // completed without error
  std::exception_ptr exception() const;
  uint64_t seq() const { return seq_; }
  OpType op() const { return op_; }
  const std::string& description() const { return description_; }
  // From creation to completion (so far, while running).
  std::chrono::nanoseconds duration() const;
  // A recv: the rank its message came from, once it has been received -- recv(src)'s src
  // (set by the ProcessGroup, for every backend), or the sender recv_any_source matched --
  // as the group numbers its ranks, like every rank argument (torch's dist.recv on a
  // subgroup returns the global rank: pg->global_rank(w->source_rank()) is that).
  // -1 before then, after a failed recv(src), and for every other op.
  int source_rank() const;

  // --- for backends and the ProcessGroup ---
  // Marks the op ended, with an error or not. The error gets the description as context.
  // Callbacks run on this thread, then waiters wake. Only the first call counts.
  void finish(std::exception_ptr error = nullptr);
  void set_source_rank(int rank);
  // Runs cb(error) when the op ends (at once if it has), on the thread that ends it, which
  // may be a backend's own. A callback must not throw: one that does is logged and dropped
  // (the Work still ends and its other callbacks run); a step that may fail belongs in
  // then(), whose Work carries its error (see ProcessGroup's list ops). Called after the
  // op ended, cb runs here, and what it throws reaches this caller.
  void on_finish(std::function<void(std::exception_ptr)> cb);

  // The core's safety net (set by the ProcessGroup on the Work its backend returned, for
  // every backend): the op's timeout, counted from now, and the name of the backend that
  // runs it (intern_backend_name). A wait or wait(timeout) on this class's wait() that finds
  // the op not ended once timeout + core_timeout_grace(timeout) have passed ends it here with a Timeout saying the backend did not end it within its
  // timeout; a later finish() by the backend is then ignored (only the first call counts).
  // Backends that enforce their timeouts themselves end their ops first. Polls
  // (is_completed) never end it: a stall watch polls under its own lock, and ending an op
  // runs its callbacks. A subclass whose wait() blocks elsewhere before calling this one
  // (shm's, mpi's) is not covered: it must keep its own timeouts. A timeout too
  // long to keep (over ~49 days) arms nothing. Kept in what was padding of this class: a
  // plugin built against earlier headers allocates and lays out Work as before.
  void arm_core_deadline(std::chrono::milliseconds timeout, uint16_t backend_name_id);
  // A process-wide number for a backend's name, for arm_core_deadline (0: none; names are
  // kept for the process's life, there are few).
  static uint16_t intern_backend_name(const std::string& name);

 protected:
  mutable std::mutex mu_;
  std::condition_variable cv_;

 private:
  const OpType op_;
  // The core's deadline (arm_core_deadline), in what was padding after op_ and after
  // source_rank_ (work.cc checks that Work's size and its older members' offsets stay what they were).
  std::atomic<bool> net_armed_{false};  // set last (arm_core_deadline: no lock)
  uint16_t net_backend_ = 0;   // intern_backend_name's number
  uint32_t net_after_ms_ = 0;  // from start_: the end of the grace
  const uint64_t seq_;
  const std::string description_;
  const Clock::time_point start_;
  Clock::time_point end_;
  bool finishing_ = false;  // finish() has begun: error_ is final
  bool completed_ = false;
  // fork_generation()'s low byte where the op was issued, in what was padding: a child
  // forked while it ran holds a copy that nothing there will ever end (api/process/).
  uint8_t issued_in_generation_ = 0;
  std::exception_ptr error_;
  int source_rank_ = -1;
  uint32_t net_timeout_ms_ = 0;  // the op's timeout, for the message
  std::vector<std::function<void(std::exception_ptr)>> callbacks_;

  // When the safety net fires (time_point::max() when unarmed); under mu_.
  Clock::time_point net_deadline_locked() const;
  // Ends the op with the safety net's Timeout (unless the backend has begun to end it),
  // then waits until it has completed. Called without mu_ held.
  void end_by_core();
  // Throws InvalidArgument in a child forked while the op ran (its threads did not come
  // along: nothing there can end it, and on a backend that runs ops on the waiting thread
  // the child would send on its parent's connections). wait() calls it first.
  void refuse_in_forked_child() const;
  friend bool forked_since_issue_in_core(const Work& work);
  friend struct WorkLayoutCheck;  // work.cc: the offsets plugins' inline accessors read
};

// The grace the core gives a backend past an op's timeout before its safety net ends the
// op: max(10 s, 10% of the timeout) (work.cc says why).
std::chrono::milliseconds core_timeout_grace(std::chrono::milliseconds timeout);

using WorkPtr = std::shared_ptr<Work>;

// A Work that ends when `first` has ended and then `next` has run, on the thread that
// ended `first`; an error of either becomes its error (next does not run after an error).
// It carries first's sequence number, description and source rank, and first's op unless
// `as` is given.
// For post-processing: unpacking list outputs, AVG's division, a comm hook's cast back.
// Its wait(timeout) waits for `first` by first's own wait() (which drives the op where the
// backend's waiters do), within the same timeout.
WorkPtr then(const WorkPtr& first, std::function<void()> next, std::optional<OpType> as = std::nullopt);

// A Work that ends when every one of `parts` has ended, with the first error in the parts'
// order (a batch of transfers run one by one). Its wait(timeout) waits for each part by
// the part's own wait(), in order, within the one timeout.
WorkPtr all_of(const std::vector<WorkPtr>& parts, OpType op, uint64_t seq, const std::string& description);

}  // namespace distcomm

// Whether this process was forked from the one that issued `work` (ABI minor 9). A core
// entry point declared weak, so that a plugin that calls it still loads in an older core
// (a member function would be an undefined symbol there, refused by the loader's RTLD_NOW).
extern "C" bool distcomm_work_forked_since_issue(const distcomm::Work* work) __attribute__((weak));

namespace distcomm {

// For a backend's own wait(): in a forked child, go straight to Work::wait, which refuses an
// op that was in flight at the fork and gives an ended one its outcome, touching none of the
// backend's state (its threads did not come along, and a lock they held at the fork stays
// held in the child). False in a core that predates the check.
inline bool forked_since_issue(const Work& work) {
  return distcomm_work_forked_since_issue && distcomm_work_forked_since_issue(&work);
}

}  // namespace distcomm
