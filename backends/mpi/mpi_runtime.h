// The process's MPI: initialised once, progressed by the threads that wait, finalised at
// exit.
//
// Threads. A thread of the plugin's own -- the MPI thread -- calls MPI_Init_thread, asking
// for MPI_THREAD_MULTIPLE. Every MPI call of an op happens in a "round": one pass that
// starts the ops that may start, tests the running ones with MPI_Test (which is what
// drives MPI's progress engine) and enforces deadlines, under one progress lock.
//   - With MPI_THREAD_MULTIPLE, small ops (under kWaiterDrivesBelowBytes) run their rounds
//     on the threads that need them: the thread that submits one runs a round (so the op
//     starts at once), and a thread in Work::wait runs rounds until its op ends. The MPI
//     thread runs rounds only for ops in flight that no thread is waiting for (compute
//     overlapping communication), and sleeps while a waiter drives. So a rank keeps one
//     busy thread, not two, and a small op costs no thread hand-off (which costs far more
//     than a small op itself). Large ops (1 MiB and up) are started and polled by the MPI
//     thread while their waiter blocks: the hand-off is small beside them, and MPI's large
//     scratch buffers (libnbc allocates one per all_reduce) then come from that thread's
//     malloc arena instead of the program's, which is faster (docs/backends.md, "MPI").
//   - With less (MPI_THREAD_FUNNELED or SERIALIZED), only the MPI thread calls MPI: it
//     runs every round, waiters block on their Work. FUNNELED is the least the plugin
//     needs, and every MPI library gives it.
// With MULTIPLE, the calls that create a group's communicator run off the MPI thread (the
// arrival messages on the creating thread, the blocking MPI_Comm_dup or
// MPI_Comm_create_group on one of their own: mpi_group_comm.h), so other groups' ops go on
// meanwhile, and the program may call MPI itself from any thread. If the program initialised MPI
// itself, the plugin needs MULTIPLE.
//
// Waiting. MPI cannot wake a thread when a request completes: the only way to see an op
// end is to test it, and a thread that tests in a loop holds a core. So of the threads in
// Work::wait on small ops, one leads and runs the rounds (which test every group's ops);
// the others sleep on a condition variable until a round ends their op or the lead leaves
// (then one of them leads). The lead polls without pause for kSpinWindow after the last
// op started or ended -- a small op whose peers are on time ends within it, at the latency
// of a busy loop -- then yields between polls until kYieldWindow, then sleeps between
// polls, each sleep a quarter of the time it has waited so far and at most kMaxSleep: a
// rank waiting for a late peer then costs a few polls a millisecond, and sees the peer
// at most a quarter of its wait (and 1 ms) late. A new waiter, a new op or a task cuts the
// lead's sleep short; while ops that the MPI thread would drive (large ones) are in
// flight, the lead does not sleep, as the MPI thread stands back while it leads.
// Polling (the MPI thread). A thread running rounds tests running ops in a loop; when the host has more
// ranks than cores it yields the CPU after a while without progress. With nothing to poll,
// the MPI thread naps: it steps in for ops that no thread drives and that stop finishing
// for a whole nap, so that a rank's own threads keep the cores while they submit and wait
// (on a small machine a second busy thread slows every rank). After a quiet while it
// sleeps until woken.
//
// Start. Open MPI's MPI_Init waits (in a PMIx fence) until every process of the mpirun job
// calls it, with no timeout and no word on who is missing. So the thread that creates the
// first group waits for the MPI thread within the group's creation deadline (init_wait.h),
// reporting every interval, and throws Timeout at the deadline, leaving the MPI thread in
// MPI_Init: nothing can call it off.
//
// Exit. An exit handler refuses new ops, gives queued and running ones 2 s to finish, then
// gives up what is left (recvs cancelled, the rest abandoned: abandoned_ops.h), saying so
// on stderr, one line per group, frees the communicators that no given-up op still uses
// and, if the plugin initialised MPI, calls MPI_Finalize. Open MPI's MPI_Finalize waits for
// every rank to call it (not for pending requests): an unbounded drain would keep a peer
// there until the op's timeout when the op is one that peer never joins (a recv of a tag
// nobody sends).
// When a failed group left operations MPI still holds, MPI_Finalize may wait for a peer
// that never comes: after a few seconds the process then ends without it, and says so on
// stderr. A process exiting with an error status (an exception out of run_main's body) gives
// the drain and MPI_Finalize 2 s, then ends without them and says so: its peers may sit in
// an op it never joined, which Open MPI's MPI_Finalize would wait for until that op's
// timeout; mpirun ends the job once the process exits with an error. A process whose
// MPI_Init, or a group's communicator creation (mpi_group_comm.h), never finished cannot
// finalize at all (a thread is still inside MPI): it ends at once without MPI_Finalize, and
// says so.
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api/group/init_wait.h"
#include "backends/mpi/abandoned_ops.h"
#include "backends/mpi/mpi_config.h"
#include "backends/mpi/op_queue.h"

namespace distcomm {
namespace mpi {

class Runtime {
 public:
  using Clock = std::chrono::steady_clock;

  // The process's runtime, started on first use (MPI is initialised on its thread). From
  // config: waiters_drive, whether threads that submit and wait may run rounds themselves
  // (with MPI_THREAD_MULTIPLE; false leaves every MPI call to the MPI thread), local_ranks
  // and iallreduce_algorithm. Only the first call's config counts. Throws
  // BackendUnavailable when MPI cannot be initialised, gives too low a thread level, or
  // was already finalised. Waits for MPI_Init (or, when the program initialised MPI, the
  // runtime's own collective start) within `wait`: Timeout at its deadline.
  static Runtime& start(const MpiConfig& config, const InitWait& wait);

  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }
  int thread_level() const { return thread_level_; }
  int tag_upper_bound() const { return tag_upper_bound_; }
  // A duplicate of MPI_COMM_WORLD made at start, for the messages with which the members
  // of a group being created find each other (mpi_group_comm.h): the program's own
  // traffic on MPI_COMM_WORLD can never match them.
  MPI_Comm arrival_comm() const { return arrival_comm_; }

  // Runs fn in a round (on the MPI thread or a driving thread) and waits for it;
  // rethrows what it throws.
  void run(const std::function<void()>& fn);
  // Runs fn in a round and does not wait for it (at once on the MPI thread): for a group's
  // abort hook, which runs on the thread recording the failure, where waiting for a round
  // could wait for a Work callback that waits for that thread (the stall watch's). What fn
  // throws is dropped; after the runtime has begun to end, fn never runs.
  void post(std::function<void()> fn);
  // Runs a blocking group-setup call: on the calling thread with MPI_THREAD_MULTIPLE
  // (other groups' ops go on meanwhile), on the MPI thread otherwise.
  void run_setup(const std::function<void()>& fn);
  // Runs fn, a blocking setup call that returns only once every member of a group makes
  // it, and waits for it within `wait` (what and hint: for its reports and Timeout). With
  // MPI_THREAD_MULTIPLE fn runs on a thread of its own, and at the deadline this throws
  // Timeout and leaves fn inside MPI: fn must then own everything it touches, and
  // if_late runs after it should it ever return. Until then the process cannot finalize
  // MPI: at exit it ends without MPI_Finalize. Without MULTIPLE fn runs on the MPI thread,
  // waited for without a deadline (it cannot be left behind there).
  void run_setup_within(std::function<void()> fn, std::function<void()> if_late, const InitWait& wait,
                        const std::string& what, const std::string& hint);

  // Serves a new communicator's ops from now on; failure is its group's, where names it
  // ("rank 1/2 group 'world'") in what is said at exit.
  std::shared_ptr<OpQueue> attach(MPI_Comm comm, std::shared_ptr<GroupFailure> failure, std::string where);
  // Fails the queue's ops with `error`, stops serving it and frees its communicator, once
  // MPI holds none of its requests (abandoned_ops.h). Never throws; does nothing once MPI
  // is finalised.
  void detach(const std::shared_ptr<OpQueue>& queue, std::exception_ptr error) noexcept;
  // How many groups' communicators it serves now (attached, not yet detached): what a
  // group that failed to be made must leave unchanged.
  size_t groups_served();
  // The process's runtime, or null before the first group started it.
  static Runtime* started();

  // Whether the thread that submits and waits for an op of `bytes` runs its progress.
  bool waiter_drives(int64_t bytes) const;
  // An op of `bytes` was submitted: start it on this thread if it is the waiter's to
  // drive, and make sure someone keeps it moving.
  void submitted(int64_t bytes);
  // Runs rounds on this thread until done() or the deadline. False, at once, when this
  // thread may not call MPI (thread level below MULTIPLE) or already runs a round (a Work
  // callback): the caller must then block instead.
  bool drive(const std::function<bool()>& done, Clock::time_point deadline);
  // Whether this thread is running a round (so, inside a Work callback).
  static bool in_round();

 private:
  struct RoundResult {
    bool running = false;     // ops are queued or in flight
    bool progressed = false;  // an op started or ended
  };

  Runtime() = default;
  void thread_main();
  void initialize();
  // Waits within `wait` until the MPI thread has started MPI (or failed to).
  void wait_started(const InitWait& wait);
  // The exit handler of a process that gave up waiting for MPI to start: if it still has
  // not, the MPI thread is inside MPI_Init and the process must end without finalizing.
  void exit_while_starting(int status);
  void serve();
  // The drain at exit ran out of time: says on stderr, one line per group, which ops are
  // left (after a 0 exit status only: an error exit says why it ends without them).
  void say_abandoned_at_exit();
  // One pass over tasks and queues, now: the time its deadlines are judged by (a driving
  // thread passes the one clock read of its poll). The caller holds progress_mu_.
  RoundResult round(bool refuse_new, Clock::time_point now = Clock::now());
  void wait_for_work(uint64_t seen);
  void run_tasks();
  void close();
  // The exit handler; status: the program's exit status.
  void stop_at_exit(int status);
  // Bumps the epoch and, if the MPI thread waits, notifies it.
  void wake();

  std::thread thread_;
  bool owns_mpi_ = false;  // the plugin called MPI_Init, so it calls MPI_Finalize
  bool program_initialized_mpi_ = false;  // MPI was initialised before the runtime started
  MPI_Comm arrival_comm_ = MPI_COMM_NULL;
  std::atomic<int> stuck_setups_{0};  // run_setup_within calls given up and still in MPI
  int world_rank_ = -1;
  int world_size_ = 0;
  int thread_level_ = MPI_THREAD_SINGLE;
  int tag_upper_bound_ = 32767;  // the least MPI guarantees
  bool yield_when_idle_ = false;  // more local ranks than cores
  bool waiters_drive_ = true;     // MPI_THREAD_MULTIPLE, and not switched off
  MpiConfig config_;              // the first group's

  std::mutex mu_;
  std::condition_variable wake_cv_;  // the MPI thread sleeps on it
  std::condition_variable done_cv_;  // callers of run() and start() wait on it
  enum class State { kStarting, kRunning, kFailed, kExiting, kFinalized } state_ = State::kStarting;
  std::exception_ptr start_error_;
  bool finalize_may_hang_ = false;  // close() found operations MPI still holds
  std::string finalize_waits_for_;  // whom they wait for (AbandonedOps::waited_for), under mu_
  struct Task {
    const std::function<void()>* fn;
    std::exception_ptr error;
    bool done = false;
    std::function<void()> owned;  // post()'s: the task owns fn, and is deleted once run
  };
  std::vector<Task*> tasks_;  // guarded by mu_
  std::atomic<size_t> task_count_{0};
  std::atomic<uint64_t> epoch_{0};  // bumped by every wake()
  std::atomic<bool> sleeping_{false};    // in wait_for_work (napping or deeply)
  std::atomic<bool> deep_sleep_{false};  // past the naps: only a notification wakes it
  std::atomic<bool> exiting_{false};
  std::atomic<int> exit_status_{0};  // the program's, set before exiting_
  std::atomic<int> drivers_{0};            // threads in drive(), leading or following
  // drive()'s threads: one leads (runs rounds), the others follow (sleep on follow_cv_).
  std::mutex drive_mu_;
  std::condition_variable follow_cv_;  // followers: a round ended ops, or the lead left
  std::condition_variable lead_cv_;    // the lead, sleeping between polls: cut it short
  bool leading_ = false;               // drive_mu_
  std::atomic<uint64_t> lead_kicks_{0};     // bumped to cut the lead's sleep short
  std::atomic<bool> lead_sleeping_{false};  // written under drive_mu_
  std::atomic<int> followers_{0};           // written under drive_mu_
  // Wakes followers whose op a round ended; the caller holds progress_mu_.
  void notify_followers();
  // Cuts short the lead's sleep between polls, if it sleeps.
  void kick_lead();
  OpCounters ops_;

  // Whoever holds progress_mu_ runs rounds; it guards everything below.
  std::mutex progress_mu_;
  std::vector<std::shared_ptr<OpQueue>> queues_;
  AbandonedOps abandoned_;  // given up, still held by MPI, and their communicators
  Clock::time_point last_abandoned_test_;
};

}  // namespace mpi
}  // namespace distcomm
