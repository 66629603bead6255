#include "backends/nccl/watchdog.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <vector>

#include "api/errors.h"
#include "api/process/thread_start.h"
#include "backends/nccl/concurrent_abort.h"

namespace distcomm {
namespace nccl {

struct Watchdog::Core {
  struct Entry {
    std::shared_ptr<WatchedComm> comm;
    std::shared_ptr<TrackedOp> op;
    Clock::time_point deadline;
    std::chrono::milliseconds timeout;
  };

  Core(std::shared_ptr<GroupFailure> f, std::chrono::microseconds poll, CommList all, std::chrono::milliseconds bound)
      : failure(std::move(f)), poll_interval(poll), all_comms(std::move(all)), abort_bound(bound) {}

  void run();
  // One pass over the ops in flight: finishes ended ones, detects faults.
  void check_once();
  // Records error with the group's failure (the first one runs the abort hooks), aborts
  // `comm` and the communicators of every op in flight, then fails those ops with the
  // group's refusal. Returns what `culprit` ends with (it is failed here if in flight).
  std::exception_ptr raise(std::exception_ptr error, const std::shared_ptr<WatchedComm>& comm,
                           const TrackedOp* culprit);
  // The group's abort hook: every communicator, the failing one first, concurrently.
  void abort_every_comm();
  // Aborts `extra` and the communicators of `entries` (concurrently) with `reason`, then
  // completes each op with error_for(op).
  template <typename ErrorFor>
  void abort_and_fail(const std::vector<Entry>& entries, const std::shared_ptr<WatchedComm>& extra,
                      const std::string& reason, ErrorFor&& error_for);

  const std::shared_ptr<GroupFailure> failure;
  const std::chrono::microseconds poll_interval;
  const CommList all_comms;
  const std::chrono::milliseconds abort_bound;
  mutable std::mutex mu;
  std::condition_variable wake;     // new ops, or stopping
  std::condition_variable drained;  // no op left in flight
  std::vector<Entry> entries;       // in issue order
  bool stopping = false;
  // The communicator of the first fault raised here, aborted before the others.
  std::shared_ptr<WatchedComm> failing_comm;
};

Watchdog::Watchdog(std::shared_ptr<GroupFailure> failure, std::chrono::microseconds poll_interval, CommList all_comms,
                   std::chrono::milliseconds abort_bound)
    : core_(std::make_shared<Core>(std::move(failure), poll_interval, std::move(all_comms), abort_bound)) {
  // The group's first failure (whoever records it) aborts every communicator, so that no
  // local thread and no peer stays blocked on one. Weak: the group's failure outlives us.
  core_->failure->on_abort([weak = std::weak_ptr<Core>(core_)] {
    if (auto core = weak.lock()) core->abort_every_comm();
  });
  // The thread owns a reference to the core: a Work callback on this thread may destroy
  // the Watchdog, and the loop it returns to must still find its state.
  thread_ = start_thread("the nccl backend's watchdog", [core = core_] { core->run(); });
}

Watchdog::~Watchdog() {
  stop("the nccl backend was shut down while this op was in flight");
  if (!thread_.joinable()) return;
  if (thread_.get_id() == std::this_thread::get_id()) {
    thread_.detach();  // destroyed by a callback on the watchdog thread: it ends by itself
  } else {
    thread_.join();
  }
}

void Watchdog::track(std::shared_ptr<WatchedComm> comm, std::shared_ptr<TrackedOp> op,
                     std::chrono::milliseconds timeout) {
  std::exception_ptr refused;
  {
    std::lock_guard<std::mutex> lock(core_->mu);
    if (core_->failure->failed()) {
      refused = core_->failure->refusal();
    } else if (core_->stopping) {
      refused = std::make_exception_ptr(PeerFailure(op->label() + ": the nccl backend was shut down"));
    } else {
      const auto deadline = timeout > std::chrono::milliseconds::zero() ? Clock::now() + timeout
                                                                        : Clock::time_point::max();
      core_->entries.push_back({std::move(comm), std::move(op), deadline, timeout});
      core_->wake.notify_all();
      return;
    }
  }
  // Raced with a fault or a shutdown: the op was enqueued on a communicator nobody will
  // watch again, so free its kernels now rather than let them spin.
  abort_concurrently(std::vector<std::shared_ptr<WatchedComm>>{comm}, message_of(refused), core_->abort_bound);
  op->complete(refused);
}

std::exception_ptr Watchdog::fail(std::exception_ptr error, std::shared_ptr<WatchedComm> comm, const TrackedOp& op) {
  return core_->raise(std::move(error), comm, &op);
}

bool Watchdog::drain(Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(core_->mu);
  auto empty = [&] { return core_->entries.empty(); };
  if (thread_.get_id() == std::this_thread::get_id()) return empty();
  if (deadline == Clock::time_point::max()) {
    core_->drained.wait(lock, empty);
    return true;
  }
  return core_->drained.wait_until(lock, deadline, empty);
}

void Watchdog::stop(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(core_->mu);
    core_->stopping = true;
  }
  core_->wake.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
  std::vector<Core::Entry> left;
  {
    std::lock_guard<std::mutex> lock(core_->mu);
    left.swap(core_->entries);
  }
  core_->drained.notify_all();
  core_->abort_and_fail(left, nullptr, why, [&](const TrackedOp& op) {
    return std::make_exception_ptr(PeerFailure(op.label() + ": " + why));
  });
}

size_t Watchdog::in_flight() const {
  std::lock_guard<std::mutex> lock(core_->mu);
  return core_->entries.size();
}

void Watchdog::Core::run() {
  std::unique_lock<std::mutex> lock(mu);
  while (!stopping) {
    if (entries.empty()) {
      wake.wait(lock, [&] { return stopping || !entries.empty(); });
      continue;
    }
    lock.unlock();
    check_once();
    lock.lock();
    wake.wait_for(lock, poll_interval, [&] { return stopping; });
  }
}

void Watchdog::Core::check_once() {
  std::vector<Entry> snapshot;
  {
    std::lock_guard<std::mutex> lock(mu);
    snapshot = entries;
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
    const std::exception_ptr why = e.comm->async_error();
    if (why) {
      // Its type is NCCL's verdict (a peer, or this rank), kept.
      error = with_detail(with_context(why, e.op->label() + ": NCCL reported an error on " + e.comm->label()),
                          "the watchdog aborted the communicator (ncclCommAbort). This group can no longer be used.");
      culprit = &e;
      break;
    }
  }
  // Every op is polled, even past a fault, so that ops already done end as successes.
  std::vector<std::shared_ptr<TrackedOp>> done;
  const auto now = Clock::now();
  for (const Entry& e : snapshot) {
    std::exception_ptr op_error;
    switch (e.op->poll(&op_error)) {
      case TrackedOp::Poll::kDone:
        done.push_back(e.op);
        break;
      case TrackedOp::Poll::kFailed:
        if (!error) {
          error = op_error;
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
  bool now_empty = false;
  {
    std::lock_guard<std::mutex> lock(mu);
    entries.erase(std::remove_if(entries.begin(), entries.end(),
                                 [&](const Entry& e) { return std::find(done.begin(), done.end(), e.op) != done.end(); }),
                  entries.end());
    now_empty = entries.empty();
  }
  if (now_empty) drained.notify_all();
  // The fault is recorded (and the group refuses new ops) before any Work callback runs.
  if (error) raise(error, culprit->comm, culprit->op.get());
  // Completions run Work callbacks: outside the lock, in issue order. A callback may
  // destroy the Watchdog; this object stays alive through the thread's reference.
  for (auto& op : done) op->complete(nullptr);
}

std::exception_ptr Watchdog::Core::raise(std::exception_ptr error, const std::shared_ptr<WatchedComm>& comm,
                                         const TrackedOp* culprit) {
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!failing_comm) failing_comm = comm;
  }
  // First: the group refuses new ops from here on, and its abort hooks have run.
  const Work* work = culprit ? culprit->work() : nullptr;
  const std::exception_ptr own = work ? failure->record(error, *work)
                                      : failure->record(error, culprit ? culprit->label() : std::string());
  std::vector<Entry> to_fail;
  {
    std::lock_guard<std::mutex> lock(mu);
    to_fail.swap(entries);
  }
  drained.notify_all();
  const std::exception_ptr refusal = failure->refusal();
  abort_and_fail(to_fail, comm, message_of(refusal), [&](const TrackedOp& op) {
    return &op == culprit ? own : refusal;
  });
  return own;
}

void Watchdog::Core::abort_every_comm() {
  std::vector<std::shared_ptr<WatchedComm>> comms;
  {
    std::lock_guard<std::mutex> lock(mu);
    comms.push_back(failing_comm);
    for (const Entry& e : entries) comms.push_back(e.comm);
  }
  if (all_comms) {
    for (auto& c : all_comms()) comms.push_back(std::move(c));
  }
  const std::optional<FailureRecord> first = failure->first();
  abort_concurrently(comms, first ? first->message : "the group failed", abort_bound);
}

template <typename ErrorFor>
void Watchdog::Core::abort_and_fail(const std::vector<Entry>& entries, const std::shared_ptr<WatchedComm>& extra,
                                    const std::string& reason, ErrorFor&& error_for) {
  std::vector<std::shared_ptr<WatchedComm>> comms{extra};
  for (const Entry& e : entries) comms.push_back(e.comm);
  abort_concurrently(comms, reason, abort_bound);
  for (const Entry& e : entries) e.op->complete(error_for(*e.op));
}

}  // namespace nccl
}  // namespace distcomm
