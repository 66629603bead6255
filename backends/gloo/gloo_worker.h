// Runs a gloo group's collectives on one thread, one at a time, in the order they were
// issued. Every rank issues collectives in the same order, so running them in order on
// each rank is what makes their messages meet; one thread per group also keeps gloo's
// context (slots, scratch) single-threaded.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "backends/gloo/gloo_failure.h"
#include "backends/gloo/gloo_op.h"

namespace distcomm {
namespace gloo_backend {

class CollectiveWorker {
 public:
  CollectiveWorker(CollectiveEnv env, GroupFailure& failure);
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
