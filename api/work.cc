#include "api/work.h"

#include <cstddef>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <limits>

#include "api/cuda_stream.h"
#include "api/errors.h"
#include "api/logging.h"
#include "api/process/fork_generation.h"

namespace distcomm {

const char* op_type_name(OpType op) {
  switch (op) {
    case OpType::kAllReduce: return "all_reduce";
    case OpType::kAllReduceCoalesced: return "all_reduce_coalesced";
    case OpType::kBroadcast: return "broadcast";
    case OpType::kReduce: return "reduce";
    case OpType::kAllGather: return "all_gather";
    case OpType::kGather: return "gather";
    case OpType::kScatter: return "scatter";
    case OpType::kReduceScatter: return "reduce_scatter";
    case OpType::kAllToAll: return "all_to_all";
    case OpType::kBarrier: return "barrier";
    case OpType::kSend: return "send";
    case OpType::kRecv: return "recv";
    case OpType::kRecvAnySource: return "recv_any_source";
    case OpType::kBatchP2P: return "batch_isend_irecv";
  }
  return "?";
}

Work::Work(OpType op, uint64_t seq, std::string description)
    : op_(op), seq_(seq), description_(std::move(description)), start_(Clock::now()),
      issued_in_generation_(static_cast<uint8_t>(fork_generation())) {}

// In a child forked while the op ran, the threads that would end it did not come along: a
// wait would last the op's whole timeout (or for ever, a lock held at the fork) for an
// outcome that never comes. An op that had ended keeps its outcome.
bool forked_since_issue_in_core(const Work& work) {
  return static_cast<uint8_t>(fork_generation()) != work.issued_in_generation_;
}

void Work::refuse_in_forked_child() const {
  if (!forked_since_issue_in_core(*this)) return;
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (lock.owns_lock() && completed_) return;
  throw InvalidArgument((description_.empty() ? std::string(op_type_name(op_)) : description_) +
                        ": waited on in a process forked (pid " + std::to_string(::getpid()) +
                        ") from the one that issued it while it ran: nothing in a forked child can end it, "
                        "and a group is not usable across fork()");
}

namespace internal {
// What the core keeps beside a Work (api/diagnostics/work_marks.cc sets it at its first
// mark) forgets it here: a Work freed without ending must not leave its marks to a later
// Work at its address. A pointer, not a call, so that the vocabulary does not include the
// diagnostics above it (tests/api/package_layers_test.sh, rule 1).
std::atomic<void (*)(const Work*)> work_destroyed_hook{nullptr};
}  // namespace internal

Work::~Work() {
  if (auto* forget = internal::work_destroyed_hook.load(std::memory_order_acquire)) forget(this);
}

namespace {

// A wake this much later than asked for: the process did not run meanwhile (SIGSTOP, a
// frozen container or cgroup, a debugger): the steady clock kept counting, so the net may be
// past due at the resume, but the backend's threads resume at the same instant and need a
// moment to see what the peers did meanwhile (the group failed, its failure published).
constexpr std::chrono::seconds kLateWake{2};
// A waiter under an armed net wakes at least this often, to tell a stop from a long wait.
constexpr std::chrono::seconds kNetTick{1};

// The grace's floor (core_timeout_grace); only tests lower it (api/diagnostics/core_net_for_tests.h).
std::atomic<int64_t> grace_floor_ms{10000};

// Process-wide, in steady-clock ticks: when a waiter last saw a resume (a late wake), and
// when the net last ended an op. A wait begun past its op's net cannot see a stop that came
// before it; it takes one for a resume unless the net has ended an op since both this op's
// issue and the last resume seen: then the backend is stuck, and each of its other ops
// (a program waits on them in turn) must not cost a grace more.
std::atomic<int64_t> resume_seen_at{std::numeric_limits<int64_t>::min()};
std::atomic<int64_t> net_fired_at{std::numeric_limits<int64_t>::min()};

int64_t ticks(Work::Clock::time_point t) { return t.time_since_epoch().count(); }

bool net_fired_since(Work::Clock::time_point issued) {
  const int64_t fired = net_fired_at.load(std::memory_order_relaxed);
  return fired > ticks(issued) && fired > resume_seen_at.load(std::memory_order_relaxed);
}

// Waits under `lock` until done(), the net, or `until`. A resume from a stop (a wake more
// than kLateWake late, or a wait begun past the net: the stop may have come before it)
// moves the net to a grace from now, so the backend gets its grace from when it could run
// again, not from when the clock says; a backend truly stuck is still ended, a grace after
// the last resume. `begun_past_net_regraces`: whether a wait begun past the net may take it
// for a resume; false once an earlier wait on the op has (a program that polls a stuck op
// with short waits, each begun past the net, would otherwise renew the grace for ever).
// Returns whether done() holds.
template <typename Done>
bool wait_through_stops(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, Done done,
                        Work::Clock::time_point& net, Work::Clock::time_point until,
                        std::chrono::milliseconds grace, Work::Clock::time_point issued,
                        bool begun_past_net_regraces) {
  // When the last wait_until was asked to wake; the first pass does not read it (no clock
  // read here: every wait on an armed op passes, most on one that has ended).
  Work::Clock::time_point asked;
  bool first = true;
  while (!done()) {
    const auto now = Work::Clock::now();
    const bool late = !first && now - asked > kLateWake;
    if (late) resume_seen_at.store(ticks(now), std::memory_order_relaxed);
    if (late || (first && begun_past_net_regraces && now >= net && !net_fired_since(issued))) {
      net = std::max(net, now + grace);
    }
    first = false;
    if (now >= net || now >= until) return false;
    asked = std::min({net, until, now + kNetTick});
    cv.wait_until(lock, asked);
  }
  return true;
}

Work::Clock::time_point deadline_of(std::chrono::milliseconds timeout);

}  // namespace

void Work::wait(std::chrono::milliseconds timeout) {
  refuse_in_forked_child();
  std::unique_lock<std::mutex> lock(mu_);
  if (completed_) {  // what the waits below find at once, without their clock reads
    if (error_) std::rethrow_exception(error_);
    return;
  }
  Clock::time_point net = net_deadline_locked();
  const auto done = [&] { return completed_; };
  const bool bounded = !is_use_default(timeout);
  if (net == Clock::time_point::max()) {
    if (!bounded) {
      cv_.wait(lock, done);
    } else if (!cv_.wait_for(lock, timeout, done)) {
      net = Clock::time_point::min();  // the caller's Timeout, below
    }
  } else {
    const auto op_timeout = std::chrono::milliseconds(net_timeout_ms_);
    const auto grace = core_timeout_grace(op_timeout);
    // net_after_ms_ beyond timeout + grace: an earlier wait moved the net for a resume.
    // (Inferred, as Work has no room for a flag: a test that lowers the grace's floor
    // between arming and waiting makes a first wait look like a later one.)
    const bool moved_before = std::chrono::milliseconds(net_after_ms_) > op_timeout + grace;
    const Clock::time_point armed = net;
    wait_through_stops(lock, cv_, done, net, bounded ? deadline_of(timeout) : Clock::time_point::max(), grace,
                       start_, !moved_before);
    // Kept for the op's later waits (under mu_, where net_deadline_locked reads it); a net
    // beyond what 32 bits of ms from the issue hold stays where it was.
    if (net > armed) {
      const auto after = std::chrono::ceil<std::chrono::milliseconds>(net - start_).count();
      if (after > 0 && after < 0xffffffffLL) net_after_ms_ = static_cast<uint32_t>(after);
    }
  }
  if (!completed_) {
    // The net first when both are due (it was due first, or at the same time); after a resume
    // the net has moved past now, and the caller's own timeout is what ran out.
    if (net != Clock::time_point::min() && Clock::now() >= net) {
      net_fired_at.store(ticks(Clock::now()), std::memory_order_relaxed);
      lock.unlock();
      end_by_core();  // the backend let the op outlive its timeout and the grace
      lock.lock();
    } else {
      throw Timeout((description_.empty() ? std::string(op_type_name(op_)) : description_) +
                    ": not finished after " + std::to_string(timeout.count()) +
                    " ms of waiting (Work::wait timeout); the op is still running");
    }
  }
  if (error_) std::rethrow_exception(error_);
}

void Work::wait(CUstream_st* stream) {
  CudaStreamGuard on(stream);
  wait();
}

// Polls do not fire the core's safety net: they run where locks may be held (a backend's
// stall watch polls its ops under its own lock), and ending an op runs its callbacks. Only
// a wait ends an op its backend let run past its deadline (work.h).
//
// Without the lock: completed_ is written once, under mu_, by a release store that comes after
// everything the op's end does (finish(): the error, the callbacks); this acquire load sees
// all of it, as taking the lock did. Every op's Work is polled (shm's wait, OpOverlaps' scans).
bool Work::is_completed() const { return __atomic_load_n(&completed_, __ATOMIC_ACQUIRE); }

bool Work::is_success() const {
  std::lock_guard<std::mutex> lock(mu_);
  return completed_ && !error_;
}

std::exception_ptr Work::exception() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

std::chrono::nanoseconds Work::duration() const {
  std::lock_guard<std::mutex> lock(mu_);
  return (completed_ ? end_ : Clock::now()) - start_;
}

int Work::source_rank() const {
  std::lock_guard<std::mutex> lock(mu_);
  return source_rank_;
}

void Work::set_source_rank(int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  source_rank_ = rank;
}

void Work::finish(std::exception_ptr error) {
  std::vector<std::function<void(std::exception_ptr)>> callbacks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finishing_) return;
    finishing_ = true;
    error_ = with_context(error, description_);
    error = error_;
    if (callbacks_.empty()) {
      // Nothing runs between the two steps below: the op ends in this one hold of the lock.
      end_ = Clock::now();
      __atomic_store_n(&completed_, true, __ATOMIC_RELEASE);  // is_completed reads it without mu_
    } else {
      callbacks.swap(callbacks_);
    }
  }
  if (callbacks.empty()) {
    cv_.notify_all();
    return;
  }
  // Callbacks first (outside the lock: they may touch this Work), then wake the waiters,
  // so a wait() that returns sees everything the callbacks did. One that throws (a program's
  // handler that rethrows the op's error) must not stop the others, leave the Work
  // unfinished (its waiters would wait for ever) or escape into the thread that finishes
  // it (a backend's own: that would end the process): it is said, then dropped.
  for (auto& cb : callbacks) {
    try {
      cb(error);
    } catch (...) {
      log_line("distcomm: " + description_ + ": a Work callback (on_finish) threw, which nothing can catch on the "
               "thread that ends the op; dropped: " + message_of(std::current_exception()) +
               " (chain a step that may fail with then(), whose Work carries its error)");
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    end_ = Clock::now();
    __atomic_store_n(&completed_, true, __ATOMIC_RELEASE);  // is_completed reads it without mu_
  }
  cv_.notify_all();
}

void Work::on_finish(std::function<void(std::exception_ptr)> cb) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!finishing_) {
    callbacks_.push_back(std::move(cb));  // finish() will run it
    return;
  }
  auto err = error_;  // finish() has begun: the outcome is known, run it here
  lock.unlock();
  cb(err);
}

// ---------------------------------------------------------------------------------------
// The core's safety net

namespace {

// Work's members before the safety net's fields: those fields live in what was padding, so
// a plugin built against earlier headers (which allocates Work with make_shared, and lays
// out its own subclasses after it) still agrees with the core on Work's size and layout.
struct WorkLayoutBeforeSafetyNet {
  virtual ~WorkLayoutBeforeSafetyNet();
  std::mutex mu;
  std::condition_variable cv;
  OpType op;
  uint64_t seq;
  std::string description;
  Work::Clock::time_point start, end;
  bool finishing, completed;
  std::exception_ptr error;
  int source_rank;
  std::vector<std::function<void(std::exception_ptr)>> callbacks;
};
static_assert(sizeof(Work) == sizeof(WorkLayoutBeforeSafetyNet), "Work's layout is part of the plugin ABI");

}  // namespace

// The size alone would let a member move within it: a plugin's inline seq(), op() and
// description() (work.h), and its subclasses' use of mu_ and cv_, read at the offsets of
// the headers it was built against. Work is not standard-layout (it has virtuals), where
// offsetof is conditionally supported: GCC and Clang give the layout's real offsets.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winvalid-offsetof"
struct WorkLayoutCheck {
  using Before = WorkLayoutBeforeSafetyNet;
  static_assert(offsetof(Work, mu_) == offsetof(Before, mu), "Work::mu_ moved: plugins' subclasses lock it");
  static_assert(offsetof(Work, cv_) == offsetof(Before, cv), "Work::cv_ moved: plugins' subclasses wait on it");
  static_assert(offsetof(Work, op_) == offsetof(Before, op), "Work::op_ moved: plugins' inline op() reads it");
  static_assert(offsetof(Work, seq_) == offsetof(Before, seq), "Work::seq_ moved: plugins' inline seq() reads it");
  static_assert(offsetof(Work, description_) == offsetof(Before, description),
                "Work::description_ moved: plugins' inline description() reads it");
  static_assert(offsetof(Work, error_) == offsetof(Before, error), "Work::error_ moved");
  static_assert(offsetof(Work, source_rank_) == offsetof(Before, source_rank), "Work::source_rank_ moved");
  static_assert(offsetof(Work, callbacks_) == offsetof(Before, callbacks), "Work::callbacks_ moved");
};
#pragma GCC diagnostic pop

namespace {

// Names for intern_backend_name, kept for the process's life (never destroyed: a Work may
// end during static destruction).
struct BackendNames {
  std::mutex mu;
  std::vector<std::string> names{""};  // 0: none
};
BackendNames& backend_names() {
  static BackendNames* names = new BackendNames;
  return *names;
}

}  // namespace

std::chrono::milliseconds core_timeout_grace(std::chrono::milliseconds timeout) {
  // Long enough that a backend which enforces its own timeouts always ends the op first,
  // with its own (better) Timeout: gloo's and shm's stall watch sees a deadline within a
  // tick (0.5 s), then GroupFailure asks the other ranks where they are (about a tick, its
  // store calls bounded at 3 s) and publishes the failure (bounded at 3 s) before the op
  // ends: up to ~7 s past the deadline when the store is slow to answer; mpi and nccl's
  // watchdogs are bounded alike. 10 s covers that with room for a loaded host; 10% of the
  // timeout keeps the margin in proportion for long timeouts (3 min for 30 min).
  return std::max<std::chrono::milliseconds>(std::chrono::milliseconds(grace_floor_ms.load(std::memory_order_relaxed)),
                                             timeout / 10);
}

namespace internal {

std::chrono::milliseconds set_core_grace_floor_for_tests(std::chrono::milliseconds floor) {
  return std::chrono::milliseconds(grace_floor_ms.exchange(floor.count()));
}

}  // namespace internal

uint16_t Work::intern_backend_name(const std::string& name) {
  BackendNames& all = backend_names();
  std::lock_guard<std::mutex> lock(all.mu);
  for (size_t i = 1; i < all.names.size(); ++i) {
    if (all.names[i] == name) return static_cast<uint16_t>(i);
  }
  if (all.names.size() > 0xffff) return 0;
  all.names.push_back(name);
  return static_cast<uint16_t>(all.names.size() - 1);
}

void Work::arm_core_deadline(std::chrono::milliseconds timeout, uint16_t backend_name_id) {
  // Every op passes here: no lock and no clock read. The fields are written before the
  // release store of net_armed_, and read only after an acquire load has seen it set; the
  // ProcessGroup arms a Work once, on the thread that issued it. Counted from start_ (the
  // Work was made by the op's backend call a moment ago, so it is the op's issue time).
  if (timeout <= std::chrono::milliseconds::zero() || net_armed_.load(std::memory_order_relaxed)) return;
  const auto after = timeout + core_timeout_grace(timeout);
  if (after.count() >= 0xffffffffLL) return;  // no deadline to keep
  net_after_ms_ = static_cast<uint32_t>(after.count());
  net_timeout_ms_ = static_cast<uint32_t>(timeout.count());
  net_backend_ = backend_name_id;
  net_armed_.store(true, std::memory_order_release);
}

Work::Clock::time_point Work::net_deadline_locked() const {
  if (!net_armed_.load(std::memory_order_acquire)) return Clock::time_point::max();
  return start_ + std::chrono::milliseconds(net_after_ms_);
}

void Work::end_by_core() {
  std::string backend;
  std::chrono::milliseconds timeout;
  {
    std::lock_guard<std::mutex> lock(mu_);
    timeout = std::chrono::milliseconds(net_timeout_ms_);
  }
  {
    BackendNames& all = backend_names();
    std::lock_guard<std::mutex> lock(all.mu);
    backend = net_backend_ < all.names.size() ? all.names[net_backend_] : "";
  }
  // finish() puts the description (rank, group, op, sequence number) before it.
  finish(std::make_exception_ptr(Timeout(
      "backend '" + (backend.empty() ? std::string("?") : backend) + "' did not end the op within its timeout (" +
      std::to_string(timeout.count()) + " ms) nor within the core's grace after it (" +
      std::to_string(core_timeout_grace(timeout).count()) +
      " ms); the core ended it with this Timeout (the backend may still be running it; what it does with the op "
      "later is ignored)")));
  // The backend may have begun to end the op first: its finish() completes it.
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return completed_; });
}

namespace {

// What is left of `timeout` at `deadline`: kUseDefault stays itself; never below zero.
std::chrono::milliseconds left_until(Work::Clock::time_point deadline, std::chrono::milliseconds timeout) {
  if (is_use_default(timeout)) return timeout;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Work::Clock::now());
  return left.count() > 0 ? left : std::chrono::milliseconds(0);
}

Work::Clock::time_point deadline_of(std::chrono::milliseconds timeout) {
  const auto now = Work::Clock::now();
  if (is_use_default(timeout) || timeout >= std::chrono::duration_cast<std::chrono::milliseconds>(
                                               Work::Clock::time_point::max() - now)) {
    return Work::Clock::time_point::max();
  }
  return now + timeout;
}

// Waits for `part` by its own wait(), which drives the op where the backend's waiters do
// (gloo runs it, mpi progresses it, shm runs its group, also from a callback), within what
// is left of `timeout`. What the wait throws before the part has ended (its Timeout, mpi's
// refusal to wait inside a callback) is thrown; the part's own error is not: it reaches the
// Work that waits through that Work's callback, which rethrows it.
// No is_completed() first: a poll tells gloo that nobody waits, and it hands the op to its
// worker (GlooWorker.AWaiterRunsItsOpAndTheWorkerSleeps).
void wait_for_part(Work& part, Work::Clock::time_point deadline, std::chrono::milliseconds timeout) {
  try {
    part.wait(left_until(deadline, timeout));
  } catch (...) {
    if (!part.is_completed()) throw;
  }
}

// then()'s Work. Waiting for it waits for `first` before, with or without a timeout.
class ChainedWork : public Work {
 public:
  ChainedWork(WorkPtr first, OpType op) : Work(op, first->seq(), first->description()), first_(std::move(first)) {}

  void wait(std::chrono::milliseconds timeout = kUseDefault) override {
    const auto deadline = deadline_of(timeout);
    if (!Work::is_completed()) wait_for_part(*first_, deadline, timeout);
    Work::wait(left_until(deadline, timeout));
  }

  bool is_completed() const override {
    if (Work::is_completed()) return true;
    first_->is_completed();  // a poll: lets the backend start the op now
    return Work::is_completed();
  }

 private:
  const WorkPtr first_;
};

// all_of()'s Work. Waiting for it waits for each part in turn, so that the parts are driven
// as their own waiters would drive them (a Work that only waited on its condition would
// leave a gloo transfer to the worker and an mpi op unprogressed, and hang a callback on
// shm's progress thread that waits for a batch nothing else moves).
class AllOfWork : public Work {
 public:
  AllOfWork(std::vector<WorkPtr> parts, OpType op, uint64_t seq, const std::string& description)
      : Work(op, seq, description), parts_(std::move(parts)) {}

  void wait(std::chrono::milliseconds timeout = kUseDefault) override {
    const auto deadline = deadline_of(timeout);
    try {
      for (const WorkPtr& part : parts_) {
        if (Work::is_completed()) break;
        wait_for_part(*part, deadline, timeout);
      }
    } catch (const Timeout&) {
      // Said of the batch and the caller's timeout, not of the part it ran out in.
      throw Timeout(description() + ": not finished after " + std::to_string(timeout.count()) +
                    " ms of waiting (Work::wait timeout); the op is still running");
    }
    Work::wait(left_until(deadline, timeout));
  }

  bool is_completed() const override {
    if (Work::is_completed()) return true;
    for (const WorkPtr& part : parts_) part->is_completed();  // polls, as then()'s Work does
    return Work::is_completed();
  }

 private:
  const std::vector<WorkPtr> parts_;
};

}  // namespace

WorkPtr then(const WorkPtr& first, std::function<void()> next, std::optional<OpType> as) {
  auto chained = std::make_shared<ChainedWork>(first, as.value_or(first->op()));
  // Runs while `first` finishes, so the raw pointer is valid (and holding it would be a cycle).
  Work* source = first.get();
  first->on_finish([chained, source, next = std::move(next)](std::exception_ptr error) {
    chained->set_source_rank(source->source_rank());  // a recv from any rank keeps its source
    if (!error) {
      try {
        next();
      } catch (...) {
        error = std::current_exception();
      }
    }
    chained->finish(error);
  });
  return chained;
}

WorkPtr all_of(const std::vector<WorkPtr>& parts, OpType op, uint64_t seq, const std::string& description) {
  auto outer = std::make_shared<AllOfWork>(parts, op, seq, description);
  struct State {
    std::mutex mu;
    size_t left;
    std::vector<std::exception_ptr> errors;
  };
  auto state = std::make_shared<State>();
  state->left = parts.size();
  state->errors.resize(parts.size());
  if (parts.empty()) outer->finish(nullptr);  // nothing to wait for
  for (size_t i = 0; i < parts.size(); ++i) {
    // The outer Work holds its parts (for its waiters to drive) and each part's callback
    // holds it: a cycle that each part's finish() breaks (it lets go of its callbacks), as
    // every part finishes. Held strongly, so that a program that keeps no reference to the
    // batch still gets its on_finish callbacks, as with any other op.
    parts[i]->on_finish([outer, state, i](std::exception_ptr error) {
      std::exception_ptr first;
      {
        std::lock_guard<std::mutex> lock(state->mu);
        state->errors[i] = error;
        if (--state->left > 0) return;
        for (const auto& e : state->errors) {
          if (e) {
            first = e;
            break;
          }
        }
      }
      outer->finish(first);
    });
  }
  return outer;
}

}  // namespace distcomm

extern "C" bool distcomm_work_forked_since_issue(const distcomm::Work* work) {
  return work != nullptr && distcomm::forked_since_issue_in_core(*work);
}
