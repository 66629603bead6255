#include "backends/gloo/gloo_p2p.h"

#include "api/process/thread_start.h"
#include "backends/gloo/gloo_errors.h"

namespace distcomm {
namespace gloo {

namespace {

// Set on a waiter thread whose TransferWaiters was stopped from a Work callback that thread
// ran (the group aborted or destroyed as a transfer ends): it is not joined, and returns
// as soon as the callback has, touching nothing of the object, which may be gone.
thread_local bool t_left_by_stop = false;

}  // namespace

TransferWaiters::~TransferWaiters() { stop(); }

void TransferWaiters::add(std::unique_ptr<Transfer> t) {
  std::exception_ptr no_waiter;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_) {
      queue_.push_back(std::move(t));
      if (idle_ < queue_.size()) no_waiter = start_waiter_locked();
      // No thread at all to wait for it: it is taken back and fails (below).
      if (no_waiter && threads_.empty()) {
        t = std::move(queue_.back());
        queue_.pop_back();
        abort_locked(*t);
      }
    }
  }
  if (t) {
    // Posted while the group shut down, or with no thread to wait for it: the transfer
    // stays posted in gloo and nobody takes it, so the group cannot go on (its failure).
    t->work->finish(no_waiter ? failure_.record(no_waiter, *t->work) : failure_.refusal());
    return;
  }
  cv_.notify_one();
}

std::exception_ptr TransferWaiters::start_waiter_locked() {
  threads_.reserve(threads_.size() + 1);  // no reallocation between the start and the push
  try {
    threads_.push_back(start_thread("a gloo send/recv waiter", [this] { loop(); }));
    return nullptr;
  } catch (const Error&) {
    // With waiters already running, one of them takes this transfer when its own ends:
    // later, but it ends. The caller decides when there is none.
    return std::current_exception();
  }
}

bool TransferWaiters::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !queue_.empty() || !waiting_.empty();
}

WorkPtr TransferWaiters::in_flight(int* peer) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Transfer* t = !waiting_.empty() ? *waiting_.begin() : queue_.empty() ? nullptr : queue_.front().get();
  if (peer) *peer = t ? t->peer : -1;
  return t ? t->work : nullptr;
}

void TransferWaiters::abort_locked(Transfer& t) {
  // The abort flag stays set until a wait consumes it, so this also covers a transfer
  // whose waiter has not started waiting yet.
  if (t.is_send) {
    t.buffer->abortWaitSend();
  } else {
    t.buffer->abortWaitRecv();
  }
}

void TransferWaiters::abort_all() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& t : queue_) abort_locked(*t);
  for (Transfer* t : waiting_) abort_locked(*t);
}

void TransferWaiters::stop() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    threads.swap(threads_);
  }
  abort_all();
  cv_.notify_all();
  bool from_a_waiter = false;
  for (auto& th : threads) {
    if (th.get_id() == std::this_thread::get_id()) {
      from_a_waiter = true;  // a Work callback on this waiter: it cannot join itself
      t_left_by_stop = true;
      th.detach();
    } else {
      th.join();  // each takes what is queued before it ends
    }
  }
  if (!from_a_waiter) return;
  // With no other waiter left, what is still queued (aborted) ends here.
  for (;;) {
    std::unique_ptr<Transfer> t;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (queue_.empty()) return;
      t = std::move(queue_.front());
      queue_.pop_front();
      waiting_.insert(t.get());
    }
    wait_and_finish(std::move(t));
  }
}

void TransferWaiters::wait_and_finish(std::unique_ptr<Transfer> t) {
  std::exception_ptr error;
  int peer = -1;
  try {
    const bool done =
        t->is_send ? t->buffer->waitSend(&peer, t->wait_limit) : t->buffer->waitRecv(&peer, t->wait_limit);
    // Aborted: the group failed or was shut down. The transfer whose failure came first
    // (the stall watch's Timeout for it) gets that error, any other the refusal.
    if (!done) error = failure_.record(failure_.refusal(), *t->work);
  } catch (...) {
    error = record_op_failure(failure_, connections_, std::current_exception(), t->timeout, *t->work, t->peer);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    waiting_.erase(t.get());
  }
  if (!error && !t->is_send) t->work->set_source_rank(peer);
  WorkPtr work = std::move(t->work);
  t.reset();
  work->finish(error);
}

void TransferWaiters::loop() {
  for (;;) {
    std::unique_ptr<Transfer> t;
    {
      std::unique_lock<std::mutex> lock(mu_);
      ++idle_;
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      --idle_;
      if (queue_.empty()) return;  // stopping; aborted transfers still queued are taken first
      t = std::move(queue_.front());
      queue_.pop_front();
      waiting_.insert(t.get());
    }
    wait_and_finish(std::move(t));
    if (t_left_by_stop) return;  // stopped by that callback: this object may be gone
  }
}

}  // namespace gloo
}  // namespace distcomm
