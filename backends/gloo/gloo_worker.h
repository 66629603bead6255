// Runs a gloo group's collectives on one thread, one at a time, in the order they were
// issued. Every rank issues collectives in the same order, so running them in order on
// each rank is what makes their messages meet; one thread per group also keeps gloo's
// context (slots, scratch) single-threaded.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "api/group_failure.h"
#include "backends/gloo/gloo_op.h"

namespace distcomm {
namespace gloo_backend {

// How the worker thread is scheduled: config["worker_sched"].
//
// "normal" (the default): SCHED_OTHER, as created.
// "batch": SCHED_BATCH, whose effect on Linux is that the worker, when woken, does not
// preempt the thread running on that core but waits for it to block, or for the tick. Each
// op wakes the worker two or more times (the caller's submit, gloo's loop thread when data
// arrives), and those wakers block a moment later: preempting them costs a switch away and
// one back. Measured on 2 cores with 2 ranks and nothing else running (tools/bench/overhead/
// gloo_overhead, ring, median of 600, direct/distcomm time in one run, 6 runs each): 8 B
// 0.47-0.76 normal, 0.57-1.14 batch; 1 MiB 0.83-0.86 normal, 1.25-1.35 batch (the worker
// then beats gloo called from a normal thread); context switches per 8 B op and rank 7.9
// normal, 6.2 batch, 4.4 gloo called directly. But with CPU-bound threads on every core (2
// busy loops) the woken worker waits for the tick: 8 B took 2.5-2.8 ms batch, 0.3-1.0 ms
// normal. So batch is for hosts whose cores the ranks have to themselves. A worker the
// program runs with a real-time policy keeps it.
enum class WorkerScheduling { kNormal, kBatch };
// "" is the default; throws InvalidArgument naming the choices.
WorkerScheduling parse_worker_scheduling(const std::string& name);

class CollectiveWorker {
 public:
  // The thread is named "dc-gloo-worker" (ps -L, perf, gdb).
  CollectiveWorker(CollectiveEnv env, GroupFailure& failure, WorkerScheduling scheduling);
  ~CollectiveWorker();
  CollectiveWorker(const CollectiveWorker&) = delete;
  CollectiveWorker& operator=(const CollectiveWorker&) = delete;

  void submit(GlooOp op);
  // Whether an op is queued or running. Read after the group is marked failed or shut
  // down, false means no op will touch the connections again.
  bool busy() const;
  // Ends the thread after it has refused the queued ops (the group must already be marked
  // failed or shut down, and a running op interrupted). Idempotent.
  void stop();

 private:
  void loop();

  CollectiveEnv env_;
  GroupFailure& failure_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<GlooOp> queue_;
  bool running_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace gloo_backend
}  // namespace distcomm
