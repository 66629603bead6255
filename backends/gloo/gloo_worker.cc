#include "backends/gloo/gloo_worker.h"

#include <algorithm>

#include "api/errors.h"
#include "api/process/thread_start.h"
#include "backends/gloo/gloo_errors.h"
#include "backends/gloo/gloo_thread_setup.h"
#include "backends/gloo/gloo_work.h"

namespace distcomm {
namespace gloo {

CollectiveWorker::CollectiveWorker(CollectiveEnv env, GroupFailure& failure)
    : env_(std::move(env)), failure_(failure) {}

std::shared_ptr<CollectiveWorker> CollectiveWorker::start(CollectiveEnv env, GroupFailure& failure,
                                                          ThreadScheduling scheduling) {
  std::shared_ptr<CollectiveWorker> worker(new CollectiveWorker(std::move(env), failure));
  // The thread holds the worker until its loop ends: a Work callback it runs may destroy
  // the group (drop the last reference), and the loop goes on after that callback returns.
  // A thread that does not start (ulimit -u) leaves thread_ empty: the worker is dropped
  // here, and its destructor's stop() has nothing to join.
  worker->thread_ = start_thread("gloo's collective worker (dc-gloo-worker)", [self = worker] { self->loop(); });
  // Here, by the constructing thread, so that it has happened when the worker is handed out.
  set_up_thread(worker->thread_.native_handle(), "dc-gloo-worker", scheduling);
  return worker;
}

CollectiveWorker::~CollectiveWorker() { stop(); }

WorkPtr CollectiveWorker::submit(GlooOp op, const OpContext& ctx) {
  std::unique_lock<std::mutex> lock(mu_);
  if (stopping_) {
    lock.unlock();
    auto refused = std::make_shared<Work>(op.type, ctx.seq, ctx.description);
    refused->finish(failure_.refusal());
    return refused;
  }
  const uint64_t ticket = next_ticket_++;
  auto work = std::make_shared<GlooWork>(op.type, ctx.seq, ctx.description, weak_from_this(), ticket);
  op.work = work;
  const Clock::time_point due = Clock::now() + kGrace;
  queue_.push_back(Queued{std::move(op), ticket, due});
  if (idle_locked()) {
    // The caller waited for its previous op: it most likely waits for this one too.
    const bool caller_waits = ticket == 0 || waited_below_ >= ticket;
    if (queue_.size() == 1 && caller_waits && !urgent_) {
      if (!timer_set_) {
        timer_.ring_at(due);
        timer_set_ = true;
      }
      // Else the timer rings sooner and the worker sets it again for `due`. A waiter that
      // takes the op leaves the timer set: the worker wakes at most once per grace.
    } else {
      wake_worker_locked();  // an earlier op was issued without waiting: so is this one
    }
  }
  // Otherwise whoever runs or finishes an op now looks at the queue when done.
  return work;
}

bool CollectiveWorker::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_ || !queue_.empty();
}

WorkPtr CollectiveWorker::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_work_;
}

void CollectiveWorker::wake_worker_locked() {
  urgent_ = true;
  timer_set_ = true;  // for now: nothing may set it later
  timer_.ring_now();
}

void CollectiveWorker::stop() {
  std::deque<Queued> refused;
  bool join = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!thread_.joinable()) return;
    stopping_ = true;
    wake_worker_locked();
    const std::thread::id me = std::this_thread::get_id();
    const bool on_worker = thread_.get_id() == me;
    if (on_worker || (finishing_ && finisher_ == me)) {
      // From a Work callback (a program that aborts or drops the group as an op ends): the
      // worker is this thread, or waits for this callback to return before it can end, so
      // it is not joined from here. What is queued is refused now, while the group's
      // failure state (the backend's) is surely there; the worker then finds nothing to do
      // and ends (it holds itself). A later stop() from elsewhere joins it; the worker's
      // own is detached: the last reference may be the one its thread drops.
      refused.swap(queue_);
      next_taken_ += refused.size();
      if (on_worker) thread_.detach();
    } else {
      join = true;  // it refuses what is queued, then ends once idle
    }
  }
  for (Queued& q : refused) q.op.work->finish(failure_.record(failure_.refusal(), *q.op.work));
  if (join) thread_.join();
}

CollectiveWorker::Taken CollectiveWorker::take_locked() {
  Taken taken;
  taken.queued = std::move(queue_.front());
  queue_.pop_front();
  ++next_taken_;
  // Decided under the lock that busy() takes: once the group is marked failed, either this
  // op is refused here or busy() has seen it running (and the caller interrupts it).
  taken.refuse = failure_.failed();
  running_ = !taken.refuse;
  if (running_) running_work_ = taken.queued.op.work;
  finishing_ = taken.refuse;
  return taken;
}

void CollectiveWorker::run_and_finish(Taken taken) {
  GlooOp& op = taken.queued.op;
  std::exception_ptr error;
  if (taken.refuse) {
    // record() answers the op whose failure came first (a queued op whose own deadline
    // passed, recorded by the stall watch) with that failure, the others with the refusal.
    error = failure_.record(failure_.refusal(), *op.work);
  } else {
    try {
      run_collective(env_, op);
    } catch (...) {
      error = record_op_failure(failure_, env_.connections, std::current_exception(), op.timeout, *op.work);
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    running_ = false;
    running_work_.reset();
    finishing_ = true;
    finisher_ = std::this_thread::get_id();
  }
  // Finishing runs the Work's callbacks (the ProcessGroup unpacks list outputs in them);
  // the next op starts after them, as it would on one thread.
  WorkPtr work = std::move(op.work);
  op = GlooOp();  // drop the tensor handles before waking the waiter
  work->finish(error);
  std::lock_guard<std::mutex> lock(mu_);
  finishing_ = false;
  finisher_ = std::thread::id();
}

void CollectiveWorker::refuse_wait_in_a_callback_locked(const std::string& description) const {
  if (finishing_ && finisher_ == std::this_thread::get_id()) {
    // Nothing else runs until this callback returns: waiting here would wait for itself
    // (with a timeout: all of it, to say only that the op still runs).
    throw Error(description + ": Work::wait called from a Work callback (on_finish) would wait for an op that "
                "cannot start before the callback returns; chain the next step with on_finish instead");
  }
}

void CollectiveWorker::refuse_wait_in_a_callback(const std::string& description) const {
  std::lock_guard<std::mutex> lock(mu_);
  refuse_wait_in_a_callback_locked(description);
}

void CollectiveWorker::drive(uint64_t ticket, const std::string& description) {
  std::unique_lock<std::mutex> lock(mu_);
  refuse_wait_in_a_callback_locked(description);
  waited_below_ = std::max(waited_below_, ticket + 1);
  while (ticket >= next_taken_ && idle_locked() && !stopping_ && !queue_.empty()) {
    Taken taken = take_locked();
    lock.unlock();
    run_and_finish(std::move(taken));
    lock.lock();
  }
  // Ops issued meanwhile by other threads, or the worker waiting to stop: hand over.
  if ((stopping_ || !queue_.empty()) && idle_locked()) wake_worker_locked();
}

void CollectiveWorker::note_waited(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  waited_below_ = std::max(waited_below_, ticket + 1);
}

void CollectiveWorker::hurry(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  if (ticket < next_taken_ || urgent_) return;  // taken already, or the worker is on it
  if (idle_locked()) {
    wake_worker_locked();
  } else {
    urgent_ = true;  // whoever runs the current op hands the rest to the worker
  }
}

void CollectiveWorker::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (idle_locked() && !queue_.empty() &&
        (urgent_ || stopping_ || queue_.front().due <= Clock::now())) {
      // Once running, the worker keeps going through the queue: what is queued behind an
      // op it runs was issued before anyone waited for that op.
      urgent_ = true;
      Taken taken = take_locked();
      lock.unlock();
      run_and_finish(std::move(taken));
      lock.lock();
      continue;
    }
    if (stopping_ && queue_.empty() && idle_locked()) return;  // every op has been answered
    if (queue_.empty()) urgent_ = false;
    if (idle_locked() && !queue_.empty() && !urgent_ && !timer_set_) {
      timer_.ring_at(queue_.front().due);  // woken early: sleep until the head's grace ends
      timer_set_ = true;
    }
    // Anything else (an op running on a waiter) wakes the worker when it is done.
    lock.unlock();
    timer_.wait();
    lock.lock();
    timer_set_ = false;
  }
}

}  // namespace gloo
}  // namespace distcomm
