// The ops of one group (one communicator), in issue order, as the MPI thread runs them.
//
// Order rules -- a group's ops must see each other's results, yet a send and its matching
// recv, issued in either order on two ranks, must not deadlock:
//   - an op starts only when no collective of the group is running, and after every op
//     issued before it has started;
//   - a collective holds the queue until it finishes; a send or recv does not (it finishes
//     in the background, and MPI keeps the order of messages per peer and tag).
// The first error or timeout leaves the group unusable (the group's GroupFailure records
// it): what is queued fails at once, and so does every later op. MPI cannot cancel a
// started collective, and after one is given up the ranks' collectives on this
// communicator would no longer match.
#pragma once

#include <mpi.h>

#include <atomic>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "api/diagnostics/group_failure.h"
#include "backends/mpi/abandoned_ops.h"
#include "backends/mpi/mpi_op.h"
#include "backends/mpi/probed_messages.h"

namespace distcomm {
namespace mpi {

// The process's op counts, kept by every queue, read by the runtime to decide whether the
// MPI thread must step in.
struct OpCounters {
  std::atomic<int64_t> in_flight{0};  // submitted, Work not finished yet
  std::atomic<uint64_t> ended{0};     // Works finished so far
  // In flight and not driven by their waiter (MpiWork::waiter_drives false: large ops, or
  // waiters_drive off): a thread that drives rounds keeps polling without sleeping while
  // there are any, since the MPI thread stands back meanwhile (Runtime::drive).
  std::atomic<int64_t> not_waiter_driven{0};
};

class OpQueue {
 public:
  enum class State { kIdle, kWaiting, kProgressed };

  // submitted(bytes): called after each submit (the runtime starts the op or wakes its
  // thread). failure: the group's, shared with its backend. where: "rank 1/2 group 'world'",
  // for what is said at exit.
  OpQueue(MPI_Comm comm, OpCounters& counters, std::function<void(int64_t)> submitted,
          std::shared_ptr<GroupFailure> failure, std::string where);
  OpQueue(const OpQueue&) = delete;
  OpQueue& operator=(const OpQueue&) = delete;

  MPI_Comm comm() const { return comm_; }
  // Before any op: whether the group has a store whose stall watch names the peers a
  // Timeout waited for (else a collective's Timeout says that none can be named).
  void set_store_names_peers(bool names) { store_names_peers_.store(names); }
  const std::string& where() const { return where_; }

  // Any thread: hands the op to the MPI thread, or fails its Work at once when the group
  // refuses new ops (failed, shut down, process exiting).
  void submit(std::unique_ptr<Op> op);
  // Any thread: later submits fail with `error` (unless the group failed before: then with
  // its failure); what is already queued still runs.
  void refuse_new(std::exception_ptr error);

  // --- whoever holds the runtime's progress lock (the MPI thread or a waiting thread) ---
  // Starts what may start, tests what runs, enforces deadlines, then finishes the Works
  // of the ops that ended (last, so that their callbacks find the queue consistent).
  State progress(Op::Clock::time_point now);
  // Fails every queued and running op with `error` and refuses later ones. Running ops
  // that MPI still holds go to the abandoned ops (their buffers must stay alive).
  void fail_all(std::exception_ptr error);
  // The group's failure has been recorded elsewhere: fails what is queued and running with it.
  void abort() { fail_all(failure_->refusal()); }
  // After fail_all: hands the communicator to the abandoned ops, which free it once none
  // of its requests is pending (abandoned_ops.h).
  void retire_comm();
  // The ops not ended yet, running ones first, for a line on stderr: "" when none,
  // "1 recv (tag 5 from rank 0)", "3 ops (send tag 9 to rank 1, all_reduce #4, ...)".
  std::string pending_ops();
  // Where ops given up by a timeout, an error or the group's end go; set before any op runs.
  void set_abandoned_sink(AbandonedOps* sink) { abandoned_ = sink; }

 private:
  State step(Op::Clock::time_point now);
  // even_if_none_counted: takes the lock even when incoming_count_ is 0 (fail_all).
  void take_incoming(bool even_if_none_counted = false);
  bool start_waiting();
  // The first op (running or waiting) whose deadline has passed, taken out of its list.
  // Looks only once now passes next_expiry_: a waiting thread runs a round about every
  // microsecond, and deadlines are seconds to minutes away.
  std::unique_ptr<Op> take_expired(Op::Clock::time_point now);
  // The op failed (MPI error or timeout): recorded as the group's failure, after which
  // everything queued or running fails with it.
  void fail_group(std::unique_ptr<Op> failed, std::exception_ptr error);
  // Finishes the op's Work; it no longer counts as in flight.
  void end(Op& op, std::exception_ptr error = nullptr);

  MPI_Comm comm_;
  std::atomic<bool> store_names_peers_{false};
  OpCounters& counters_;
  const std::function<void(int64_t)> submitted_;
  const std::shared_ptr<GroupFailure> failure_;
  const std::string where_;

  // Guards incoming_; submit() checks the group's failure and queues under it, so that an
  // op is either refused or seen by the fail_all() that follows the failure.
  std::mutex mu_;
  std::deque<std::unique_ptr<Op>> incoming_;
  std::atomic<size_t> incoming_count_{0};

  // Progress lock holder only.
  std::deque<std::unique_ptr<Op>> waiting_;  // taken from incoming_, not started yet
  std::unique_ptr<Op> collective_;           // the running collective
  std::vector<std::unique_ptr<Op>> p2p_;     // running sends and recvs
  std::vector<std::unique_ptr<Op>> ended_;   // finished in this step, Works not yet told
  std::vector<std::pair<int, int>> unmatched_;  // step(): (source, tag) of recvs not matched yet
  ProbedMessages probed_;  // messages matched before their recv came
  // No deadline of an op in waiting_, collective_ or p2p_ is earlier (it may be earlier than
  // all of them: ops ended since). Lowered as ops come in, recomputed by take_expired.
  Op::Clock::time_point next_expiry_ = Op::Clock::time_point::max();
  AbandonedOps* abandoned_ = nullptr;
};

}  // namespace mpi
}  // namespace distcomm
