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
// Every blocked poll checks the running op's deadline (Timeout) and the state of the peer
// it waits for (kFailed / kClosed: that rank's published reason); every 10 ms of waiting it
// also asks whether that peer is still alive (shm_segment.h). The first failure fails
// everything queued and is published for the peers (shm_failure.h).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api/group_failure.h"
#include "backends/shm/shm_collective.h"
#include "backends/shm/shm_config.h"
#include "backends/shm/shm_failure.h"
#include "backends/shm/shm_group.h"
#include "backends/shm/shm_p2p.h"
#include "backends/shm/shm_rounds.h"
#include "backends/shm/shm_wait.h"

namespace distcomm {
namespace shm {

struct CollectiveTask {
  WorkPtr work;
  std::unique_ptr<CollectiveOp> op;  // holds its tensors
  std::chrono::milliseconds timeout{0};
  bool started = false;
  bool written = false;  // this round's write is posted
  uint64_t round = 0;    // the op's own round
  // Set the first time the running op waits for a peer: the timeout bounds waiting, and an
  // op that never waits costs no look at the clock.
  Clock::time_point deadline;
};

class Engine {
 public:
  Engine(std::unique_ptr<MappedGroup> group, const ShmConfig& config);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Starts the progress thread (named dc-shm-progress).
  void start();
  // Queues an op, and starts it when no other thread is polling. After a failure or
  // shutdown it ends at once with the group's refusal.
  void submit(CollectiveTask task);
  void submit(P2PRequest request);
  // Makes progress until `work` has ended or `timeout` (negative: none) has passed; says
  // whether it has ended. For a Work found not ended.
  bool wait_for(const Work& work, std::chrono::milliseconds timeout);
  // Fails what is queued or running with "shut down" and stops the progress thread. Never
  // waits for peers. Idempotent.
  void shutdown();

  const MappedGroup& group() const { return *group_; }

 private:
  struct Poll {
    bool progressed = false;
    Blocker blocker;
    Clock::time_point wake_by = Clock::time_point::max();  // next deadline or liveness check
    Clock::time_point now;  // when a blocked poll looked at the clock; unset otherwise
  };

  template <typename Item>
  void enqueue(std::deque<Item>& queue, Item item);
  // Needs progress_mu_. `look_when_blocked`: check the deadline and the awaited peer when
  // nothing moved (a caller that will not wait skips that).
  Poll poll(std::vector<Completion>& done, bool look_when_blocked = true);
  void take_submissions(std::vector<Completion>& done);
  bool advance_collectives(std::vector<Completion>& done, Blocker* blocker);
  void check_blocked(const Blocker& collective_blocker, Clock::time_point now, Poll* result);
  // The completions a drive() collects, reused by the thread's outermost drive().
  class DoneList;
  void fail_group(const Failure& failure, std::vector<Completion>& done);
  // The running collective's Work, null when none is running.
  const Work* running_op() const;
  // Throws GroupFailedError when a peer has published a failure.
  void check_peers_usable() const;
  void fail_everything(const std::exception_ptr& first, const std::exception_ptr& rest, std::vector<Completion>& done);

  // Polls with backoff until stop() says so (asked after each poll); returns its last answer.
  template <typename Stop>
  bool drive(Stop stop, Clock::time_point give_up);
  void complete(std::vector<Completion>& done);
  void progress_loop();
  void wake_progress_thread();

  const std::unique_ptr<MappedGroup> group_;
  const ShmConfig config_;
  const WaitPolicy policy_;
  GroupFailure failure_;  // api's: first failure, refusals; its abort hook publishes to peers

  std::mutex submit_mu_;
  std::deque<CollectiveTask> new_collectives_;
  std::deque<P2PRequest> new_requests_;
  std::atomic<bool> has_new_{false};
  std::atomic<int64_t> pending_{0};  // submitted, not yet completed

  std::mutex progress_mu_;  // held by the one thread that polls; guards what follows
  RoundCursor cursor_;
  std::deque<CollectiveTask> collectives_;
  PointToPoint p2p_;
  Clock::time_point next_liveness_check_;

  std::atomic<uint64_t> polls_{0};
  std::atomic<int> waiters_{0};  // threads in wait_for
  std::atomic<bool> stopping_{false};
  std::mutex done_mu_;  // waiters that could not poll sleep here until a poller finishes works
  std::condition_variable done_cv_;

  std::mutex thread_mu_;
  std::condition_variable thread_cv_;
  std::atomic<bool> thread_asleep_{false};
  std::thread thread_;
};

}  // namespace shm
}  // namespace distcomm
