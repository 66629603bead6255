// Runs a gloo group's collectives one at a time, in the order they were issued. Every rank
// issues collectives in the same order, so running them in order on each rank is what
// makes their messages meet; one op at a time also keeps gloo's context (slots, scratch)
// single-threaded.
//
// Who runs an op: the thread that waits for it, or the group's worker thread.
// - A thread that calls wait() (without a timeout) on an op that nobody has started runs
//   it itself, and any ops issued before it that nobody has started, then returns. The
//   common `pg->all_reduce(t)->wait()` thus runs gloo on the caller's thread, as a program
//   calling gloo directly does: no hand-off to another thread and back (each one a
//   context switch and a wake-up in the op's critical path).
// - The worker runs what nobody waits for. An op issued while the caller's previous op
//   went unwaited (issue, issue, ...: DDP's buckets, a list of async ops) wakes it at once;
//   so do polling an op (is_completed), waiting with a timeout, and ops queued behind one
//   the worker runs. Async use thus keeps its overlap: the ops run while the caller
//   computes.
// - An op whose caller waited for its previous one is left for that caller, who most likely
//   calls wait() next. Should it not, the worker takes the op once it has waited `kGrace`.
// The worker sleeps on a timer (gloo_wake_timer.h). Setting a timer is costly on a VM (each
// set or clear reprograms the host's timer, a cost of the order of a small op), so submit
// sets it only when it is not set, nothing clears it, and a caller that waits for every op
// makes the worker wake at most once per grace, finding nothing to do.
// An op's Work is finished (its callbacks run) before the next op starts, whoever runs it.
#pragma once

#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "api/plugin/backend.h"
#include "api/diagnostics/group_failure.h"
#include "backends/gloo/gloo_config.h"
#include "backends/gloo/gloo_op.h"
#include "backends/gloo/gloo_wake_timer.h"

namespace distcomm {
namespace gloo {

// How the worker thread is scheduled: config["worker_sched"].
//
// "normal" (the default): SCHED_OTHER, as created.
// "batch": SCHED_BATCH, whose effect on Linux is that the worker, when woken, does not
// preempt the thread running on that core but waits for it to block, or for the tick. This
// matters for ops nobody waits for (those the worker runs): each wakes it, and its wakers
// block a moment later, so preempting them costs a switch away and one back. But with
// CPU-bound threads on every core the woken worker waits for the tick, milliseconds per
// op. So batch is for hosts whose cores the ranks have to themselves. A worker the program runs with a real-time policy keeps it.
// (ThreadScheduling, in gloo_config.h, where the key is parsed.)

class CollectiveWorker : public std::enable_shared_from_this<CollectiveWorker> {
 public:
  using Clock = WakeTimer::Clock;
  // How long an op whose caller waited for its previous one waits for that caller before
  // the worker runs it: the longest an op can start late when its caller, after waiting
  // for every op so far, neither waits for it nor polls it nor issues another.
  static constexpr std::chrono::milliseconds kGrace{10};

  // The thread is named "dc-gloo-worker" (ps -L, perf, gdb). Works hold a weak reference.
  static std::shared_ptr<CollectiveWorker> start(CollectiveEnv env, GroupFailure& failure,
                                                 ThreadScheduling scheduling);
  ~CollectiveWorker();
  CollectiveWorker(const CollectiveWorker&) = delete;
  CollectiveWorker& operator=(const CollectiveWorker&) = delete;

  // Queues op (op.work is set here) and returns its Work. After stop() the Work is
  // already finished with the group's refusal.
  WorkPtr submit(GlooOp op, const OpContext& ctx);
  // Whether an op is queued or running. Read after the group is marked failed or shut
  // down, false means no op will touch the connections again.
  bool busy() const;
  // The op running now (on the worker or a waiter), null if none.
  WorkPtr running() const;
  // Ends the thread after it has refused the queued ops and an op a waiter runs has ended
  // (the group must already be marked failed or shut down, and a running op interrupted).
  // Idempotent. Later waiters run nothing. From a Work callback (on the worker, or on the
  // thread finishing an op) it refuses the queued ops itself and does not join: the thread
  // ends on its own once the callback has returned.
  void stop();

  // For GlooWork. ticket: the op's place in issue order.
  // Runs the queued ops up to and including `ticket` on this thread, as far as no other
  // thread is running one; returns when that op is done or another thread has it.
  void drive(uint64_t ticket, const std::string& description);
  // Throws drive()'s Error when this thread runs a Work callback of this worker's (a wait
  // with a timeout there could only run out: the op cannot start before it returns).
  void refuse_wait_in_a_callback(const std::string& description) const;
  // wait() on the op, which had ended: its caller waits for its ops (see submit).
  void note_waited(uint64_t ticket);
  // Someone polls the op or waits with a deadline: if it is still queued, the worker
  // runs it (and what is queued before it) now.
  void hurry(uint64_t ticket);

 private:
  void refuse_wait_in_a_callback_locked(const std::string& description) const;
  struct Queued {
    GlooOp op;
    uint64_t ticket = 0;
    Clock::time_point due;  // when the worker takes it if no waiter has
  };
  struct Taken {
    Queued queued;
    bool refuse = false;
  };

  CollectiveWorker(CollectiveEnv env, GroupFailure& failure);
  void loop();
  // Pops the head (mu_ held); the caller must then run_and_finish it.
  Taken take_locked();
  void run_and_finish(Taken taken);
  bool idle_locked() const { return !running_ && !finishing_; }
  // Ops are queued and nobody will run them: the worker runs them now (mu_ held).
  void wake_worker_locked();

  CollectiveEnv env_;
  GroupFailure& failure_;
  WakeTimer timer_;
  mutable std::mutex mu_;
  std::deque<Queued> queue_;
  uint64_t next_ticket_ = 0;  // the next op submitted gets this
  uint64_t next_taken_ = 0;   // the queue's head has this; smaller ones are taken
  uint64_t waited_below_ = 0;  // ops before this one have had a waiter (drive)
  bool running_ = false;      // an op is running (on the worker or a waiter)
  WorkPtr running_work_;      // its Work
  bool finishing_ = false;    // its Work is being finished; the next op waits for that
  std::thread::id finisher_;  // the thread that finishes it
  bool urgent_ = false;       // the worker takes queued ops without waiting for their grace
  bool timer_set_ = false;    // the timer will ring (the worker has not seen it yet)
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace gloo
}  // namespace distcomm
