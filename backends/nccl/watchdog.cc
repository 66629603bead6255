#include "backends/nccl/watchdog.h"

#include <algorithm>

#include "api/errors.h"

namespace distcomm {
namespace nccl {
namespace {

std::string what_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    return "unknown error";
  }
}

}  // namespace

Watchdog::Watchdog(std::function<void(std::exception_ptr)> on_fault,
                   std::chrono::microseconds poll_interval)
    : on_fault_(std::move(on_fault)), poll_interval_(poll_interval) {
  thread_ = std::thread([this] { run(); });
}

Watchdog::~Watchdog() {
  stop("the nccl backend was shut down while this op was in flight");
  // stop() does not join when it runs on the watchdog thread itself (a Work callback that
  // shut the backend down); the object is going away, so let the thread finish alone.
  if (thread_.joinable()) thread_.detach();
}

void Watchdog::track(std::shared_ptr<WatchedComm> comm, std::shared_ptr<TrackedOp> op,
                     std::chrono::milliseconds timeout) {
  std::exception_ptr refused;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (fault_) {
      refused = fault_;
    } else if (stopping_) {
      refused = std::make_exception_ptr(PeerFailure("the nccl backend was shut down"));
    } else {
      // A zero or negative timeout means none (OpContext's default, for direct backend use).
      const auto deadline = timeout > std::chrono::milliseconds::zero() ? Clock::now() + timeout
                                                                        : Clock::time_point::max();
      entries_.push_back({std::move(comm), std::move(op), deadline, timeout});
      cv_.notify_all();
      return;
    }
  }
  // Raced with a fault or a shutdown: the op was enqueued on a communicator nobody will
  // watch again, so free its kernels now rather than let them spin.
  comm->abort();
  op->complete(refused);
}

void Watchdog::stop(const std::string& why) {
  std::vector<Entry> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    left.swap(entries_);
  }
  if (!left.empty()) fail_all(std::move(left), nullptr, std::make_exception_ptr(PeerFailure(why)));
}

size_t Watchdog::in_flight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

std::exception_ptr Watchdog::fault() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fault_;
}

void Watchdog::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    if (entries_.empty()) {
      cv_.wait(lock, [&] { return stopping_ || !entries_.empty(); });
      continue;
    }
    lock.unlock();
    check_once();
    lock.lock();
    cv_.wait_for(lock, poll_interval_, [&] { return stopping_; });
  }
}

void Watchdog::check_once() {
  std::vector<Entry> snapshot;
  {
    std::lock_guard<std::mutex> lock(mu_);
    snapshot = entries_;
  }
  // Polling happens outside the lock: CUDA and NCCL queries must not block track().
  std::exception_ptr error;
  const Entry* culprit = nullptr;
  // Communicator errors first: "peer closed the connection" explains a stuck op better
  // than the timeout that would follow it.
  std::vector<WatchedComm*> asked;
  for (const Entry& e : snapshot) {
    if (std::find(asked.begin(), asked.end(), e.comm.get()) != asked.end()) continue;
    asked.push_back(e.comm.get());
    const std::string why = e.comm->async_error();
    if (!why.empty()) {
      error = std::make_exception_ptr(PeerFailure(
          e.op->label() + ": NCCL reported an error on " + e.comm->label() + ": " + why +
          ". The watchdog aborted the communicator (ncclCommAbort); a peer may have died. "
          "This group can no longer be used."));
      culprit = &e;
      break;
    }
  }
  // Every op is polled, even past a fault, so that ops already done end as successes.
  std::vector<std::shared_ptr<TrackedOp>> done;
  const auto now = Clock::now();
  for (const Entry& e : snapshot) {
    std::string why;
    switch (e.op->poll(&why)) {
      case TrackedOp::Poll::kDone:
        done.push_back(e.op);
        break;
      case TrackedOp::Poll::kFailed:
        if (!error) {
          error = std::make_exception_ptr(
              Error(e.op->label() + ": CUDA reported an error while the op ran: " + why));
          culprit = &e;
        }
        break;
      case TrackedOp::Poll::kRunning:
        if (!error && now >= e.deadline) {
          error = std::make_exception_ptr(Timeout(
              e.op->label() + ": did not finish within " + std::to_string(e.timeout.count()) +
              " ms. The watchdog aborted " + e.comm->label() +
              " (ncclCommAbort): a peer may have died or stalled, or the ranks issued different "
              "collectives. This group can no longer be used."));
          culprit = &e;
        }
        break;
    }
  }

  std::vector<Entry> to_fail;
  {
    std::lock_guard<std::mutex> lock(mu_);
    entries_.erase(std::remove_if(entries_.begin(), entries_.end(),
                                  [&](const Entry& e) {
                                    return std::find(done.begin(), done.end(), e.op) != done.end();
                                  }),
                   entries_.end());
    if (error) {
      if (!fault_) fault_ = error;
      to_fail.swap(entries_);
    }
  }
  // Completions run Work callbacks: outside the lock, in issue order.
  for (auto& op : done) op->complete(nullptr);
  if (error) {
    fail_all(std::move(to_fail), culprit, error);
    on_fault_(error);
  }
}

void Watchdog::fail_all(std::vector<Entry> entries, const Entry* culprit, std::exception_ptr error) {
  std::vector<WatchedComm*> aborted;
  auto abort_once = [&](WatchedComm* c) {
    if (std::find(aborted.begin(), aborted.end(), c) != aborted.end()) return;
    aborted.push_back(c);
    c->abort();
  };
  if (culprit) abort_once(culprit->comm.get());
  for (const Entry& e : entries) abort_once(e.comm.get());

  const std::string first = what_of(error);
  for (const Entry& e : entries) {
    if (culprit && e.op == culprit->op) {
      e.op->complete(error);
    } else {
      const char* link = culprit ? ": aborted because of an earlier fault: " : ": ";
      e.op->complete(std::make_exception_ptr(PeerFailure(e.op->label() + link + first)));
    }
  }
}

}  // namespace nccl
}  // namespace distcomm
