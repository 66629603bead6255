#include "backends/gloo/gloo_worker.h"

#include <pthread.h>
#include <sched.h>

#include "api/errors.h"
#include "backends/gloo/gloo_errors.h"

namespace distcomm {
namespace gloo_backend {
namespace {

// Done by the constructing thread, so that it has happened when the worker is handed out.
// Best effort: a refusal leaves the thread as it was.
void set_up_worker_thread(pthread_t thread, WorkerScheduling scheduling) {
  pthread_setname_np(thread, "dc-gloo-worker");
  int policy = 0;
  sched_param param{};
  if (scheduling != WorkerScheduling::kBatch || pthread_getschedparam(thread, &policy, &param) != 0 ||
      policy != SCHED_OTHER) {
    return;
  }
  param.sched_priority = 0;  // SCHED_BATCH keeps the thread's nice value
  pthread_setschedparam(thread, SCHED_BATCH, &param);
}

}  // namespace

WorkerScheduling parse_worker_scheduling(const std::string& name) {
  if (name.empty() || name == "normal") return WorkerScheduling::kNormal;
  if (name == "batch") return WorkerScheduling::kBatch;
  throw InvalidArgument("gloo: unknown worker_sched '" + name + "' (config 'worker_sched'); expected normal or batch");
}

CollectiveWorker::CollectiveWorker(CollectiveEnv env, GroupFailure& failure, WorkerScheduling scheduling)
    : env_(std::move(env)), failure_(failure), thread_([this] { loop(); }) {
  set_up_worker_thread(thread_.native_handle(), scheduling);
}

CollectiveWorker::~CollectiveWorker() { stop(); }

void CollectiveWorker::submit(GlooOp op) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(op));
  }
  cv_.notify_one();
}

bool CollectiveWorker::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_ || !queue_.empty();
}

void CollectiveWorker::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void CollectiveWorker::loop() {
  for (;;) {
    GlooOp op;
    bool refuse = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and every op has been answered
      op = std::move(queue_.front());
      queue_.pop_front();
      // Decided under the lock that busy() takes: once the group is marked failed, either
      // this op is refused here or busy() has seen it running (and the caller interrupts it).
      refuse = failure_.failed();
      running_ = !refuse;
    }
    std::exception_ptr error;
    if (refuse) {
      error = failure_.refusal();
    } else {
      try {
        run_collective(env_, op);
      } catch (...) {
        error = failure_.record(to_distcomm_error(std::current_exception(), op.timeout), *op.work);
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      running_ = false;
    }
    // Finishing runs the Work's callbacks (the ProcessGroup unpacks list outputs in them).
    WorkPtr work = std::move(op.work);
    op = GlooOp();  // drop the tensor handles before waking the waiter
    work->finish(error);
  }
}

}  // namespace gloo_backend
}  // namespace distcomm
