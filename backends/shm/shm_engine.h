// The progress engine of one shm group: runs its collectives (in issue order, round by
// round) and its point-to-point transfers, without a thread hand-off on the fast path.
//
// Nothing here ever blocks on a peer: poll() moves whatever can move and says what it is
// waiting for. Progress is made by
//   - the thread that issues a collective, when no other thread is polling: it starts the
//     op (writes and posts its first round) before it returns;
//   - the thread that waits on a Work (ShmWork::wait): it polls, and between polls spins,
//     yields, then sleeps on the futex word of the peer it waits for (shm_wait.h), so an
//     issue-then-wait costs no context switch at all;
//   - the group's progress thread, for ops nobody waits on (DDP's overlapped buckets, a
//     send whose receiver waits): when an op has been pending for `nap` with no poll
//     from anyone, it drives until nothing is pending or a waiter arrives.
// One thread polls at a time (the progress lock). Work callbacks run after it is released.
//
// Every round is marked with its op's agreement hash, and a peer's round is read only when
// its mark equals this rank's op: a difference is a Desync (no data read), with the table
// of what each rank runs there, read from the peers' op lines (shm_op_line.h).
// Every blocked poll, and every 64th poll that moved something (so that traffic with one
// peer does not hide an op stuck on another), checks the deadline of every queued op
// (counted from its issue: an op waiting behind a stuck one fails at its own deadline,
// Timeout) and the state of the peer it waits for (kFailed / kClosed: that rank's
// published reason); every 10 ms it also asks whether that peer's process still runs
// (api/plugin/process_watch.h). The first failure
// fails everything queued and is published for the peers (shm_failure.h) and on the
// group's store (api/diagnostics/group_failure.h); one recorded outside the engine (the stall watch's
// Timeout or Desync) fails everything at the next poll.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api/diagnostics/group_failure.h"
#include "api/store/store.h"
#include "backends/shm/shm_collective.h"
#include "backends/shm/shm_config.h"
#include "backends/shm/shm_failure.h"
#include "backends/shm/shm_group.h"
#include "backends/shm/shm_p2p.h"
#include "backends/shm/shm_rounds.h"
#include "backends/shm/shm_task_ring.h"
#include "backends/shm/shm_wait.h"

namespace distcomm {
namespace shm {

struct CollectiveTask {
  CollectiveTask() = default;
  CollectiveTask(CollectiveTask&&) noexcept = default;
  CollectiveTask& operator=(CollectiveTask&&) = delete;  // queues construct and destroy, never assign
  ~CollectiveTask() { op.reset(); }  // first: it may live in work's memory (ShmWork::op_space)

  // Copies of the op's tensors where they own their memory, to keep it alive until the op
  // ends; a tensor that does not (Tensor::from_blob without an owner) has nothing a copy
  // could hold. Engine::submit calls it only for an op still in flight when it returns.
  void hold(const Tensor& out, const Tensor& in) {
    if (out.owns_memory()) held_out = out;
    if (in.owns_memory()) held_in = in;
  }

  WorkPtr work;
  OpPtr op;
  Tensor held_out, held_in;  // hold()'s
  // The op's agreement hash (OpFingerprint::agreement_hash): every round of it is marked
  // with it, and a peer's round with another mark is never read.
  uint64_t agreement = 0;
  OpDescription description;  // what the op is, for a peer that finds its mark differs
  std::chrono::milliseconds timeout{0};
  // Its issue + timeout: the op fails there, also while it waits behind earlier ops.
  Clock::time_point deadline = Clock::time_point::max();
  bool started = false;
  bool written = false;  // this round's write is posted
  uint64_t round = 0;    // the op's own round
};

// Always owned by a shared_ptr (the backend and every ShmWork hold one): the progress
// thread holds one too while it runs, so that a Work callback that destroys the group on
// that thread never leaves the thread running on a destroyed engine.
class Engine : public std::enable_shared_from_this<Engine> {
 public:
  // board: the group's store (failures are published there too; may be null).
  Engine(std::unique_ptr<MappedGroup> group, const ShmConfig& config, StorePtr board);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Starts the progress thread (named dc-shm-progress).
  void start();
  // Queues an op, and starts it when no other thread is polling. After a failure or
  // shutdown it ends at once with the group's refusal. `out` and `in` are its tensors, alive
  // during the call: the task holds them (CollectiveTask::hold) only where the op is still
  // in flight when this returns, so an op that the issuing thread ran to its end here costs
  // no copy of them.
  void submit(CollectiveTask&& task, const Tensor& out, const Tensor& in);
  void submit(P2PRequest request);
  // Makes progress until `work` has ended or `timeout` (negative: none) has passed; says
  // whether it has ended. For a Work found not ended.
  bool wait_for(const Work& work, std::chrono::milliseconds timeout);
  // Fails what is queued or running with "shut down" and stops the progress thread. Never
  // waits for peers. Idempotent. Also from a Work callback on the progress thread (abort or
  // destroy the group when an op ends): that thread is then told to stop, not joined (it
  // ends once the callback returns).
  void shutdown();
  // At shutdown: one line naming the sends whose messages no receive of their destination
  // took (PointToPoint::sends_not_taken), once such a destination has had a moment.
  void warn_of_sends_not_taken();

  const MappedGroup& group() const { return *group_; }
  // How a waiter waits (spin, yield, sleep), and the words that say it and why (shm_cpus.h
  // wait_decision_text), decided once at creation.
  struct WaitDecision {
    WaitPolicy policy;
    std::string text;
  };
  const WaitDecision& wait_decision() const { return decision_; }
  // The group's failure state, for the stall watch (which must be stopped before the
  // engine goes).
  GroupFailure& failure() { return failure_; }

 private:
  struct Poll {
    bool progressed = false;
    Blocker blocker;
    Clock::time_point wake_by = Clock::time_point::max();  // next deadline or liveness check
    Clock::time_point now;  // when a blocked poll looked at the clock; unset otherwise
  };

  template <typename Item>
  void enqueue(std::vector<Item>& queue, Item&& item);
  // Needs progress_mu_. `look_when_blocked`: check the deadline and the awaited peer when
  // nothing moved (a caller that will not wait skips that).
  Poll poll(std::vector<Completion>& done, bool look_when_blocked = true);
  void take_submissions(std::vector<Completion>& done);
  bool advance_collectives(std::vector<Completion>& done, Blocker* blocker);
  void check_blocked(const Blocker& collective_blocker, Clock::time_point now, Poll* result);
  // What to wait on when a collective is blocked: its peer's post, and this rank's doorbell
  // too when transfers are pending (Blocker::bell).
  Blocker with_doorbell(const Blocker& collective_blocker, bool p2p_pending) const;
  // Throws the Desync of a peer whose round `t` is at is marked with another op, with the
  // table of what every rank that reached that round runs there (their op lines).
  [[noreturn]] void mismatch(const CollectiveTask& t, int peer) const;
  // The completions a drive() collects, reused by the thread's outermost drive().
  class DoneList;
  // Records `failure` (dead peers their launcher stopped named apart: with_launcher_stops)
  // and ends every op with it or the refusal.
  void fail_group(const Failure& failure, std::vector<Completion>& done);
  // The running collective's Work, null when none is running.
  const Work* running_op() const;
  // Throws GroupFailedError when a peer has published a failure.
  void check_peers_usable() const;
  // Ends every op, queued or running, with error_for(its Work, whether it has started).
  using ErrorFor = std::function<std::exception_ptr(const Work& op, bool started)>;
  void fail_everything(const ErrorFor& error_for, std::vector<Completion>& done);
  // The group failed outside the engine (the stall watch recorded it): every op ends with
  // what GroupFailure says it must. Says whether any op was there to end.
  bool follow_recorded_failure(std::vector<Completion>& done);

  // Polls with backoff until stop() says so (asked after each poll); returns its last answer.
  template <typename Stop>
  bool drive(Stop stop, Clock::time_point give_up);
  void complete(std::vector<Completion>& done);
  void progress_loop();
  // Records the death of a peer whose process ended while no op was in flight (the progress
  // thread, asleep, calls it every kIdleWatch): as gloo's connection watch does, so that what
  // waits for that rank outside the ops (the host exchange) learns it from the group's
  // board, and the next op is refused at once naming it.
  void look_at_idle_peers();
  void wake_progress_thread();

  const std::unique_ptr<MappedGroup> group_;
  const ShmConfig config_;
  const WaitDecision decision_;
  GroupFailure failure_;  // api's: first failure, refusals; its abort hook publishes to peers

  std::mutex submit_mu_;
  // Vectors, cleared when taken: their room stays, so queueing allocates nothing once grown.
  std::vector<CollectiveTask> new_collectives_;
  std::vector<P2PRequest> new_requests_;
  std::atomic<bool> has_new_{false};
  std::atomic<int64_t> pending_{0};  // submitted, not yet completed
  std::atomic<uint64_t> completed_{0};  // ever completed: whether ops end between the progress thread's naps

  std::mutex progress_mu_;  // held by the one thread that polls; guards what follows
  RoundCursor cursor_;
  TaskRing<CollectiveTask> collectives_;
  PointToPoint p2p_;
  Clock::time_point next_liveness_check_;
  uint64_t progressed_polls_ = 0;

  std::atomic<uint64_t> polls_{0};
  std::atomic<int> waiters_{0};  // threads in wait_for
  std::atomic<bool> stopping_{false};
  std::mutex done_mu_;  // waiters that could not poll sleep here until a poller finishes works
  std::condition_variable done_cv_;

  std::mutex thread_mu_;
  std::condition_variable thread_cv_;
  std::atomic<bool> thread_asleep_{false};
  std::atomic<bool> parked_for_waiters_{false};  // the progress thread sleeps until no thread waits
  std::thread thread_;
};

}  // namespace shm
}  // namespace distcomm
