#include "backends/mpi/mpi_runtime.h"

#include <sched.h>
#include <sys/prctl.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "api/errors.h"
#include "api/process/thread_start.h"
#include "backends/mpi/mpi_types.h"

namespace distcomm {
namespace mpi {
namespace {

// With nothing to poll, the MPI thread naps this long at a time, for kNapWindow after it
// last had something to do, before it sleeps until woken. While it naps, a submit needs no
// wake-up (a futex call costs more than a small all_reduce), and an op nobody drives is
// picked up within two naps. Every nap's end interrupts a rank's busy thread when cores
// are few: at 200 us naps a 16 MiB all_reduce on 2 ranks and 2 cores took 40% longer.
constexpr auto kNap = std::chrono::milliseconds(1);
constexpr auto kNapWindow = std::chrono::milliseconds(10);
// Ops below this size are driven by the threads that submit and wait for them; larger
// ones by the MPI thread (see mpi_runtime.h). Measured on 2 ranks, 2 cores, against
// MPI_Allreduce: at 256 KiB 94% of its bandwidth driven by the waiter, 77% by the MPI
// thread; at 1 MiB about even; at 16 MiB the MPI thread a third faster.
constexpr int64_t kWaiterDrivesBelowBytes = 1 << 20;
// On an oversubscribed host, a polling thread that has seen nothing start or end for this
// long yields between tests, so that ranks sharing a core let each other run.
constexpr auto kSpinBeforeYield = std::chrono::microseconds(50);
// How a thread in Work::wait that leads the rounds waits for its op (mpi_runtime.h,
// "Waiting"): after the last op started or ended, it polls without pause for kSpinWindow
// (an 8 B all_reduce on 2 ranks takes 2.5 us, a 256 KiB one about 100 us: a peer on time
// is seen at once), yields between polls until kYieldWindow (other threads and ranks
// get the core, but an idle core polls on), then sleeps between polls, a quarter of the
// time waited so far (so a peer that comes late is seen at most that much later), at most
// kMaxSleep. Blocked 8 s on a late peer, the waiting rank used 0.2-0.3 CPU s (a whole core before).
constexpr auto kSpinWindow = std::chrono::microseconds(50);
constexpr auto kYieldWindow = std::chrono::microseconds(200);
constexpr auto kMaxSleep = std::chrono::milliseconds(1);
// A follower re-checks its op and deadline at least this often (it is woken when a round
// ends its op or the lead leaves; this is only a backstop).
constexpr auto kFollowerRecheck = std::chrono::milliseconds(20);
// Ops given up after a timeout are tested this often while nothing else runs.
constexpr auto kAbandonedTestInterval = std::chrono::milliseconds(50);
// At exit, how long ops still queued or running may take to end before they are given up
// (recvs cancelled, the rest left to MPI_Finalize). A program that returns without
// waiting for an op its peers never join (a recv nobody sends to) would otherwise keep the
// whole job until that op's timeout (30 min by default): its peers sit in MPI_Finalize,
// which in Open MPI waits for every rank. Ops the peers do join end within it.
constexpr auto kExitDrainGrace = std::chrono::seconds(2);

// Set while this thread runs a round: run() then runs its task inline, and drive() must
// not start a nested round (a Work callback that waits would wait for itself).
thread_local bool t_in_round = false;

std::exception_ptr exiting_error() {
  return std::make_exception_ptr(BackendUnavailable(
      "mpi backend: the process is exiting and MPI is being finalized; no new operation can start"));
}

// Tracks progress of a polling loop; once nothing has moved for a while, yields the CPU
// between tests if the host is oversubscribed (and only then reads the clock).
class Backoff {
 public:
  explicit Backoff(bool yield) : yield_(yield) {}
  void after(bool progressed) {
    if (!yield_) return;
    const Runtime::Clock::time_point now = Runtime::Clock::now();
    if (progressed) {
      last_progress_ = now;
    } else if (now - last_progress_ > kSpinBeforeYield) {
      sched_yield();
    }
  }

 private:
  const bool yield_;
  Runtime::Clock::time_point last_progress_ = Runtime::Clock::now();
};

}  // namespace

Runtime::RoundResult Runtime::round(bool refuse_new, Clock::time_point now) {
  // Cleared however the round ends: a throw left this thread taken for one in a round for
  // good (it then never drove again).
  struct InRound {
    InRound() { t_in_round = true; }
    ~InRound() { t_in_round = false; }
  } in_round;
  run_tasks();
  if (refuse_new) {
    for (auto& queue : queues_) queue->refuse_new(exiting_error());
  }
  RoundResult result;
  // By index, holding each queue: a Work callback may detach a queue (erasing it here).
  for (size_t i = 0; i < queues_.size(); ++i) {
    std::shared_ptr<OpQueue> queue = queues_[i];
    const OpQueue::State state = queue->progress(now);
    result.running |= state != OpQueue::State::kIdle;
    result.progressed |= state == OpQueue::State::kProgressed;
  }
  if (!abandoned_.empty() && (result.running || now - last_abandoned_test_ > kAbandonedTestInterval)) {
    abandoned_.test();
    last_abandoned_test_ = now;
  }
  if (result.progressed) notify_followers();
  return result;
}

void Runtime::notify_followers() {
  // Pairs with drive(): a follower counts itself, then tests its op; this marks ops done
  // (OpQueue::end), then reads the count. Whichever comes second sees the other's write.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (followers_.load() == 0) return;
  std::lock_guard<std::mutex> lock(drive_mu_);
  follow_cv_.notify_all();
}

void Runtime::kick_lead() {
  // Pairs with drive(): the lead reads the count before its round and sleeps only while it
  // is unchanged; it says it sleeps before it tests that, and this counts before it reads
  // whether the lead sleeps.
  lead_kicks_.fetch_add(1);
  if (!lead_sleeping_.load()) return;
  std::lock_guard<std::mutex> lock(drive_mu_);
  lead_cv_.notify_one();
}

void Runtime::serve() {
  // Naps as short as kNap want a timer slack well below the default 50 us.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  Backoff backoff(yield_when_idle_);
  bool idle_before = true;
  Clock::time_point drain_until = Clock::time_point::max();  // set once exiting with ops left
  while (true) {
    const uint64_t seen = epoch_.load();
    const bool exiting = exiting_.load();
    // A thread in Work::wait drives the rounds: stand back rather than compete for the
    // lock and the CPU. Its ops are looked at again when it leaves.
    if (!exiting && drivers_.load() > 0) {
      wait_for_work(seen);
      continue;
    }
    RoundResult r;
    {
      std::lock_guard<std::mutex> lock(progress_mu_);
      r = round(exiting);
    }
    if (r.running) {
      if (exiting) {
        const Clock::time_point now = Clock::now();
        if (drain_until == Clock::time_point::max()) drain_until = now + kExitDrainGrace;
        if (now >= drain_until) {
          // close() fails what is left: recvs cancelled, what MPI still holds abandoned.
          say_abandoned_at_exit();
          return;
        }
      }
      backoff.after(r.progressed || idle_before);
      idle_before = false;
      continue;
    }
    if (exiting) return;  // drained
    idle_before = true;
    wait_for_work(seen);
  }
}

void Runtime::say_abandoned_at_exit() {
  if (exit_status_.load() != 0) return;
  std::lock_guard<std::mutex> lock(progress_mu_);
  for (auto& queue : queues_) {
    const std::string pending = queue->pending_ops();
    if (pending.empty()) continue;
    std::fprintf(stderr,
                 "distcomm: %s: exiting with %s still pending; abandoned after %lld s (wait() on ops before the "
                 "program ends to be sure they finish)\n",
                 queue->where().c_str(), pending.c_str(), static_cast<long long>(kExitDrainGrace.count()));
  }
  std::fflush(stderr);
}

void Runtime::wait_for_work(uint64_t seen) {
  const Clock::time_point nap_until = Clock::now() + kNapWindow;
  std::unique_lock<std::mutex> lock(mu_);
  sleeping_.store(true);
  bool unattended_before = false;
  uint64_t ended_before = ops_.ended.load();
  while (epoch_.load() == seen) {
    const bool no_driver = drivers_.load() == 0;
    if (no_driver && task_count_.load() > 0) break;  // a task posted while a driver left
    const bool unattended = no_driver && ops_.in_flight.load() > 0;
    const uint64_t ended = ops_.ended.load();
    // Ops in flight, no thread driving them, none finished for a whole nap: step in.
    if (unattended && unattended_before && ended == ended_before) break;
    unattended_before = unattended;
    ended_before = ended;
    if (!unattended && Clock::now() >= nap_until) {
      // Pairs with submitted(): either that sees deep_sleep_ and wakes this thread, or
      // this sees its op counted in flight and stays awake.
      deep_sleep_.store(true);
      if (ops_.in_flight.load() == 0 || drivers_.load() > 0) {
        // Woken by wake(); and now and then anyway, to test ops given up after a timeout.
        wake_cv_.wait_for(lock, kAbandonedTestInterval, [&] { return epoch_.load() != seen; });
      }
      deep_sleep_.store(false);
      break;
    }
    wake_cv_.wait_for(lock, kNap);
  }
  sleeping_.store(false);
}

void Runtime::wake() {
  // Pairs with wait_for_work: either the sleeper sees the new epoch before it waits, or
  // this sees sleeping_ and notifies under the lock the sleeper waits with.
  epoch_.fetch_add(1);
  if (sleeping_.load()) {
    std::lock_guard<std::mutex> lock(mu_);
    wake_cv_.notify_one();
  }
  // With a thread leading the rounds, the MPI thread stands back: the lead runs the task
  // or polls the op, so it must not sleep through it.
  kick_lead();
}

bool Runtime::waiter_drives(int64_t bytes) const { return waiters_drive_ && bytes < kWaiterDrivesBelowBytes; }

void Runtime::submitted(int64_t bytes) {
  const bool waiter = waiter_drives(bytes);
  if (waiter && !t_in_round) {
    std::unique_lock<std::mutex> progress(progress_mu_, std::try_to_lock);  // released on a throw too
    if (progress.owns_lock()) round(false);
  }
  // The caller may never wait. For a small op a napping MPI thread steps in by itself if
  // no one drives it, a sleeping one must be woken; a large op is the MPI thread's anyway.
  if (drivers_.load() == 0 && (!waiter || deep_sleep_.load())) {
    wake();
  } else {
    kick_lead();  // its peers may be on time: poll it tightly again
  }
}

bool Runtime::in_round() { return t_in_round; }

bool Runtime::drive(const std::function<bool()>& done, Clock::time_point deadline) {
  if (!waiters_drive_ || t_in_round) return false;
  drivers_.fetch_add(1);
  const bool timed = deadline != Clock::time_point::max();
  bool lead = false;
  Clock::time_point quiet_since = Clock::now();  // the lead's last progress
  // Leaves on return or throw: hands the lead to a follower, and wakes the MPI thread for
  // ops or tasks nobody drives now.
  struct Leave {
    Runtime& rt;
    const bool& lead;
    ~Leave() {
      if (lead) {
        std::lock_guard<std::mutex> lock(rt.drive_mu_);
        rt.leading_ = false;
        if (rt.followers_.load() > 0) rt.follow_cv_.notify_all();
      }
      // Pairs with submitted() and run(): an op or task posted while this driver was still
      // here is counted by the time it is read below.
      if (rt.drivers_.fetch_sub(1) == 1 && (rt.ops_.in_flight.load() > 0 || rt.task_count_.load() > 0)) rt.wake();
    }
  } leave{*this, lead};
  // One clock read per poll: it judges the deadlines of the next round and of this wait, and
  // the lead's quiet time. At ~40 ns a read here (kvm-clock), the 4 reads a poll took before
  // were a third of the backend's own time between two MPI_Tests.
  Clock::time_point now = quiet_since;
  while (!done()) {
    if (timed && now >= deadline) break;
    if (!lead) {
      std::unique_lock<std::mutex> lock(drive_mu_);
      if (leading_) {
        // Another thread runs the rounds, for every group's ops: sleep until one ends ours
        // (notify_followers) or the lead leaves, instead of competing for the lock and the
        // cores (with several waiting threads on 2 cores that made ops 10-80x slower).
        followers_.fetch_add(1);
        std::atomic_thread_fence(std::memory_order_seq_cst);  // pairs with notify_followers
        if (lead_sleeping_.load()) {  // our op may have peers on time: poll tightly again
          lead_kicks_.fetch_add(1);
          lead_cv_.notify_one();
        }
        follow_cv_.wait_until(lock, std::min(deadline, now + kFollowerRecheck), [&] { return done() || !leading_; });
        followers_.fetch_sub(1);
        now = Clock::now();
        continue;
      }
      leading_ = true;
      lead = true;
      quiet_since = now;
    }
    const uint64_t kicks = lead_kicks_.load();
    bool progressed = false;
    {
      std::unique_lock<std::mutex> progress(progress_mu_, std::try_to_lock);  // released on a throw too
      if (progress.owns_lock()) progressed = round(false, now).progressed;
    }
    now = Clock::now();
    if (progressed) {
      quiet_since = now;
      continue;
    }
    const auto quiet = now - quiet_since;
    if (quiet < kSpinWindow) continue;
    if (quiet < kYieldWindow || ops_.not_waiter_driven.load() > 0) {
      // Ops the MPI thread would poll (it stands back while a thread leads) must not wait
      // for our sleeps: yield only, and on a host with cores to spare not even that.
      if (quiet < kYieldWindow || yield_when_idle_) {
        sched_yield();
        now = Clock::now();  // the yield may have lasted a while
      }
      continue;
    }
    Clock::time_point until =
        now + std::min<Clock::duration>(kMaxSleep, std::max<Clock::duration>(quiet / 4, kSpinWindow));
    if (timed) until = std::min(until, deadline);
    {
      std::unique_lock<std::mutex> lock(drive_mu_);
      lead_sleeping_.store(true);
      lead_cv_.wait_until(lock, until, [&] { return lead_kicks_.load() != kicks || done(); });
      lead_sleeping_.store(false);
    }
    now = Clock::now();
    if (lead_kicks_.load() != kicks) quiet_since = now;  // a new op or waiter: spin again
  }
  return true;
}

void Runtime::run_tasks() {
  if (task_count_.load() == 0) return;
  std::vector<Task*> tasks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks.swap(tasks_);
    task_count_.store(0);
  }
  for (Task* task : tasks) {
    try {
      (*task->fn)();
    } catch (...) {
      task->error = std::current_exception();
    }
  }
  std::vector<Task*> posted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (Task* task : tasks) {
      if (task->owned) {
        posted.push_back(task);  // nobody waits for it
      } else {
        task->done = true;
      }
    }
  }
  for (Task* task : posted) delete task;
  done_cv_.notify_all();
}

void Runtime::post(std::function<void()> fn) {
  if (t_in_round) {  // from a Work callback: this thread already holds the progress lock
    try {
      fn();
    } catch (...) {
    }
    return;
  }
  auto* task = new Task{nullptr, nullptr};
  task->owned = std::move(fn);
  task->fn = &task->owned;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_ != State::kRunning) {
      delete task;
      return;
    }
    tasks_.push_back(task);
    task_count_.fetch_add(1);
  }
  wake();
}

void Runtime::run(const std::function<void()>& fn) {
  if (t_in_round) {  // from a Work callback: this thread already holds the progress lock
    fn();
    return;
  }
  Task task{&fn, nullptr};
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_ != State::kRunning) std::rethrow_exception(exiting_error());
    tasks_.push_back(&task);
    task_count_.fetch_add(1);
  }
  wake();
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return task.done; });
  if (task.error) std::rethrow_exception(task.error);
}

void Runtime::run_setup(const std::function<void()>& fn) {
  if (thread_level_ == MPI_THREAD_MULTIPLE) {
    fn();
  } else {
    run(fn);
  }
}

void Runtime::run_setup_within(std::function<void()> fn, std::function<void()> if_late, const InitWait& wait,
                                const std::string& what, const std::string& hint) {
  if (thread_level_ != MPI_THREAD_MULTIPLE) {
    run(fn);
    return;
  }
  // Shared with the thread, which may outlive this call.
  struct Call {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    bool given_up = false;
    std::exception_ptr error;
  };
  auto call = std::make_shared<Call>();
  std::thread thread = start_thread("an MPI call with a deadline (" + what + ")", [this, call, fn = std::move(fn),
                                                                                  if_late = std::move(if_late)] {
    std::exception_ptr error;
    try {
      fn();
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(call->mu);
    call->done = true;
    call->error = error;
    if (call->given_up) {
      if_late();
      stuck_setups_.fetch_sub(1);
    }
    call->cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(call->mu);
  try {
    wait.until(
        what, [&](std::chrono::milliseconds slice) { return call->cv.wait_for(lock, slice, [&] { return call->done; }); },
        [] { return std::vector<int>{}; }, hint);
  } catch (...) {
    call->given_up = true;
    stuck_setups_.fetch_add(1);
    lock.unlock();
    thread.detach();
    throw;
  }
  lock.unlock();
  thread.join();
  if (call->error) std::rethrow_exception(call->error);
}

std::shared_ptr<OpQueue> Runtime::attach(MPI_Comm comm, std::shared_ptr<GroupFailure> failure, std::string where) {
  auto queue = std::make_shared<OpQueue>(comm, ops_, [this](int64_t bytes) { submitted(bytes); }, std::move(failure),
                                         std::move(where));
  run([&] {
    queue->set_abandoned_sink(&abandoned_);
    queues_.push_back(queue);
  });
  return queue;
}

void Runtime::detach(const std::shared_ptr<OpQueue>& queue, std::exception_ptr error) noexcept {
  try {
    run([&] {
      queue->fail_all(error);
      queue->retire_comm();
      queues_.erase(std::remove(queues_.begin(), queues_.end(), queue), queues_.end());
    });
  } catch (...) {
    // MPI is finalized (the exit handler failed and freed every queue) or exiting.
  }
}

size_t Runtime::groups_served() {
  std::lock_guard<std::mutex> progress(progress_mu_);
  return queues_.size();
}

void Runtime::close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    state_ = State::kExiting;  // run() refuses from now on
  }
  std::lock_guard<std::mutex> progress(progress_mu_);
  t_in_round = true;
  run_tasks();  // those queued before the refusal
  for (auto& queue : queues_) {
    queue->fail_all(exiting_error());
    queue->retire_comm();
  }
  queues_.clear();
  abandoned_.test();
  if (arrival_comm_ != MPI_COMM_NULL) MPI_Comm_free(&arrival_comm_);
  t_in_round = false;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!abandoned_.empty()) {
    // Open MPI finalizes cleanly with abandoned (timed-out) requests still pending -- once
    // every peer calls MPI_Finalize too, which a stuck peer does not: the exit handler
    // then stops waiting (stop_at_exit).
    std::string waits_for = abandoned_.waited_for();
    std::lock_guard<std::mutex> lock(mu_);
    finalize_waits_for_ = std::move(waits_for);
    finalize_may_hang_ = true;
    done_cv_.notify_all();
  }
  if (owns_mpi_ && !finalized) MPI_Finalize();
  std::lock_guard<std::mutex> lock(mu_);
  state_ = State::kFinalized;
  done_cv_.notify_all();
}

}  // namespace mpi
}  // namespace distcomm
