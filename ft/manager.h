// distcomm::ft::Manager: training that goes on when members die or join.
//
// A DDP program drives it once per step:
//
//   ft::Manager ft(options);                    // this process's member, its store connections
//   while (ft.committed_steps() < steps) {
//     ProcessGroupPtr pg = ft.begin_step(state);  // the step's group; new when membership changed
//     if (ft.group_changed()) ddp = make_ddp(*pg);  // a DDP over the new group
//     try {
//       auto [begin, end] = shard(global_batch, pg->rank(), pg->size());  // re-sharded
//       forward/backward over [begin, end); ddp.finish_backward();
//     } catch (const distcomm::Error& e) {
//       ft.step_failed(e.what());
//     }
//     if (ft.commit()) optimizer.step();        // every member finished: apply; else redo
//   }
//
// - Membership is a sequence of generations (generation.h), agreed through the store, which
//   must outlive every member: tools/launch or spawn() serve it (or ft_bench), not rank 0.
// - A step commits only if every member of its generation finished it: each adds itself to
//   the step's count, the last one writes the verdict "commit", and a member whose step
//   failed (or the liveness monitor, for a member that is gone) writes "abort" first. Every
//   member reads the one verdict, so no step is applied by some and not others.
// - After "abort" the survivors form the next generation without whoever is gone, and redo
//   the step over its group. Each generation's group is a new ProcessGroup (the ranks'
//   renumbered; its store namespace gen/<g>/ keeps generations apart, so ranks that disagree
//   on membership never run an op together).
// - A process started to replace one (ManagerOptions::joining) registers, and is taken in
//   at the next step boundary; before its first step the members' state (the tensors given
//   to begin_step) is broadcast to it from rank 0 of the new generation, a member that has it.
// - Detection (liveness_monitor.h): a member's process gone on this host is seen within one
//   heartbeat interval, a closed connection by the backend at once, and a member that stops
//   beating (another host gone, a process stopped or stalled) after heartbeat_timeout. A
//   member whose own heartbeat has not reached the store for heartbeat_timeout (partitioned
//   from it, or the store stalled for everyone) aborts its own step's group (the others, if
//   they reach the store, drop it by then) and waits for the store: a beat that gets
//   through settles it (fenced, or it goes on); past recovery_timeout it ends: its next
//   begin_step or commit throws StoreError, "lost the job's store".
// - A member taken for gone is fenced for good (liveness.h): the launcher that serves the
//   store kills its process if it is one of its ranks (api/process/fenced_member.h), and a
//   member that runs again before that (SIGCONT) finds its dead mark at its next
//   begin_step or commit and throws, never rejoining.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/errors.h"
#include "api/process_group.h"
#include "api/store/store.h"
#include "api/tensor.h"
#include "api/timeouts.h"
#include "ft/generation.h"

namespace distcomm {
namespace ft {

class LivenessMonitor;

struct ManagerOptions {
  // This member's id, unique in the job. "": $DISTCOMM_FT_MEMBER_ID, else "rank<RANK>" for
  // a first member and "joiner-<pid>@<host>" for a joiner.
  std::string member_id;
  // A process that joins a running job (a replacement). Unset: $DISTCOMM_FT_JOIN == "1".
  std::optional<bool> joining;
  // The first generation's size: members "rank0".."rank<n-1>". -1: $WORLD_SIZE.
  int initial_members = -1;
  // Fewer members than this: every survivor stops with an error naming who is left, unless
  // the launcher announced replacements that are due: then they wait for those first, up to
  // recovery_timeout (replacement_wait.h).
  int min_members = 1;
  // Each generation's backend spec. "": $DISTCOMM_BACKEND, else "auto".
  std::string backend;
  std::map<std::string, std::string> backend_config;
  std::chrono::milliseconds heartbeat_interval{100};
  // A member on another host whose heartbeat does not move for this long is gone.
  // Zero: $DISTCOMM_FT_HEARTBEAT_TIMEOUT_MS, else 3 s.
  std::chrono::milliseconds heartbeat_timeout{0};
  // The ops' timeout in each generation's group, and the bound of a commit's wait.
  std::chrono::milliseconds op_timeout = kDefaultGroupTimeout;
  // Forming a generation after a failure or for a joiner, state transfer included: one
  // forming (re-formings within it included), from this member's start of it, by its own
  // clock. Not a run of step failures that each come after a generation formed: each starts
  // a forming of its own (docs/fault-tolerance.md). The first generation waits up to
  // op_timeout (the ranks may start slowly). Also how long a member
  // none of whose heartbeats reaches the store waits for it before it ends.
  std::chrono::milliseconds recovery_timeout = std::chrono::seconds(60);
  // While a forming waits for members, a generation's group's creation for its ranks, or a
  // joiner for the job's first generation (as its Manager is made) or to be taken in, every
  // this often it logs whom it waits for and when it gives up, as init's waits do. Zero:
  // $DISTCOMM_INIT_REPORT_SECONDS (init's report interval, read once, at construction), else
  // 30 s.
  std::chrono::milliseconds report_interval{0};
  // What the state is ("mlp 4 x [256,256] f32, sgd momentum"): a joiner whose signature
  // differs from the members' is refused (InvalidArgument naming both), and the job goes on.
  std::string state_signature;
  // A new connection to the job's store (called twice: one for the caller's thread, one for
  // the liveness monitor). Unset: a TCPStore client of MASTER_ADDR:MASTER_PORT with the
  // job's identity from the environment. The Manager sets each one's timeout (op_timeout;
  // heartbeat_timeout for the monitor's), which bounds every call on it.
  std::function<StorePtr()> connect;
};

// What commit() throws, on every member, when the same step has failed in
// kSameStepFailures generations in a row with the same members (read from the store, the same on every member): an
// error that every member hits each time (a program error, not a lost rank), which another
// generation cannot cure. It names the step, how many generations failed it, and the first
// failure's reason. Where that run began with the generation that took joiners in, after
// a generation without them committed steps, the joiners are refused instead
// (joiner_refusal.h): each one's commit throws StepKeepsFailing saying so, and the members
// go on without them. A joiner waiting to be taken in when the job stops throws Error.
class StepKeepsFailing : public Error {
 public:
  using Error::Error;
  ~StepKeepsFailing() override;
};

// How many generations in a row, with the same members and nobody gone, may fail one step
// before the job stops (StepKeepsFailing). A transient fault (a connection reset) fails a step
// once, seldom twice (a stall of the store that was waited out is not counted at all:
// store_stall.h, kStoreStallAbort); a third failure of the same step by the same
// members is an error they will hit every time, and retrying it would re-form generations
// for ever (found by an outside user: hundreds of generations, no step committed).
inline constexpr int kSameStepFailures = 3;

// What the manager saw, for benchmarks and logs (wall-clock times, comparable across the
// processes of one host).
struct FailureEvent {
  uint64_t generation = 0;  // the generation whose step failed
  uint64_t step = 0;
  std::string why;          // the verdict's reason
  std::chrono::system_clock::time_point noticed;    // when this member learned it
  std::chrono::system_clock::time_point recovered;  // when its next step committed (epoch if not yet)
};

class Manager {
 public:
  explicit Manager(ManagerOptions options = {});
  ~Manager();
  Manager(const Manager&) = delete;
  Manager& operator=(const Manager&) = delete;

  // The group of the next step. When membership changed (a member gone, a joiner waiting,
  // or this is the first step), forms the next generation and its group first, and, if it
  // has a member that joined, broadcasts `state` (every tensor, in order, the same list on
  // every member) from rank 0 to them. Throws Error when fewer than min_members are left
  // (and no replacement due makes up the numbers by recovery_timeout: replacement_wait.h),
  // or when this member was taken for gone (fenced: liveness.h's fenced_message), and
  // PeerFailure when it was left out for coming late; InvalidArgument for a joiner whose
  // state (dtypes, shapes) differs from the members', naming both. Null for a joiner when
  // the training finished (finish()) before it was taken in: it has nothing to do; Error
  // for one when the job stopped (StepKeepsFailing, too few members, forming given up)
  // before it was taken in.
  ProcessGroupPtr begin_step(const std::vector<Tensor*>& state);
  // Whether the last begin_step gave another group than the step before: rebuild what
  // refers to the old one (DDP) now. The old group lives until this step's commit().
  bool group_changed() const { return group_changed_; }

  // Training has ended (every member calls it after its last commit): a joiner still waiting
  // to be taken in stops waiting, and its begin_step returns null; this member takes nobody
  // for gone any more (the others may end first).
  void finish();

  // This member's step failed (call it where an op of the step threw).
  void step_failed(const std::string& why);
  // Ends the step: true when every member finished it (apply the update now), false when
  // it is to be redone by the survivors (do not apply). After op_timeout without a verdict
  // this member writes "abort" itself (the first verdict written stands for everyone).
  // Throws Error (fenced_message) when the others took this member for gone meanwhile, and
  // StepKeepsFailing (on every member alike) when this step has now failed in
  // kSameStepFailures generations in a row with the same members (only on the joiners, who
  // are refused, when those failures began as they came in: see StepKeepsFailing).
  bool commit();

  uint64_t committed_steps() const { return committed_; }
  const Generation& generation() const { return generation_; }
  const std::string& id() const { return id_; }
  const std::vector<FailureEvent>& failures() const { return failures_; }

 private:
  using Clock = std::chrono::steady_clock;
  // The parts of forming the next generation, in order.
  void form_next(const std::vector<Tensor*>& state);
  // begin_step's and commit's work; they add, to a store error, that this member lost the
  // job's store.
  ProcessGroupPtr begin_step_with_store(const std::vector<Tensor*>& state);
  bool commit_with_store();
  // Throws StoreError when this member's liveness monitor found that no heartbeat of it
  // reached the store for recovery_timeout (LivenessMonitor::lost_store).
  void throw_if_store_lost() const;
  void agree_on_state(const std::vector<Tensor*>& state);  // the members' state; a joiner's checked
  Generation agree_on_next(const std::vector<std::string>& previous, Clock::time_point deadline);
  void make_group(Clock::time_point creation_deadline);
  void hand_state(const std::vector<Tensor*>& state);  // to the members that lack it
  void log_generation(const std::vector<std::string>& before) const;
  // How many generations in a row, this one the last, failed step s with this generation's
  // members; *first_why: the oldest one's reason (left as it is when only this one failed).
  int same_step_failures(uint64_t s, std::string* first_why);
  // The StepKeepsFailing message when step s's failure in this generation (its reason `why`)
  // is the kSameStepFailures-th in a row with nobody gone (then also written to the store,
  // for the waiting joiners); "" while retrying may help. When that run began with joiners
  // taken in (joiner_refusal.h), they are refused instead: "" for the members, who go on
  // without them, and the refusal for a joiner.
  std::string keeps_failing(uint64_t s, const std::string& why);
  // Throws for this member's dead mark `mark`: StepKeepsFailing for a refused joiner (kept,
  // so that every later call throws it), else Error (fenced_message).
  [[noreturn]] void throw_taken_out(const std::string& mark);
  // Rethrows `stop`, which ends the job on every member (fewer than min_members left in the
  // generation the store holds), after writing its message where waiting joiners read it
  // (keys::kStopped), when this member holds the state (job_stop.cc). Not for a forming
  // given up on this member's own clock: the others may go on.
  [[noreturn]] void stop_job(std::exception_ptr stop);
  // `formed` has fewer than min_members: returns once enough joiners wait to be taken in
  // (the caller forms the next generation with them), having waited for the replacements
  // its launcher announced, up to `deadline` (replacement_wait.h); else stops the job
  // (stop_job): at once when none is due. Returns how long it waited for a replacement
  // (nullopt: it did not need to).
  std::optional<Clock::duration> await_replacements(const Generation& formed, Clock::time_point deadline);
  // After such a wait: rank 0 of `next` says which joiners came in (those of `next` that
  // were not in `short_of_members`, the generation that waited).
  void log_joiners_taken_in(const std::vector<std::string>& short_of_members, const Generation& next,
                            Clock::duration waited) const;
  // After step s of this generation committed: its lowest member deletes the keys of the
  // steps and generations nobody can read any more (forgetting.h).
  void forget(uint64_t s);

  ManagerOptions options_;
  std::string id_;
  bool joining_ = false;
  StorePtr store_;  // the "ft/" namespace over the caller's connection
  std::unique_ptr<LivenessMonitor> monitor_;
  std::unique_ptr<Liveness> liveness_;
  Generation generation_;
  ProcessGroupPtr group_;
  ProcessGroupPtr retired_;  // the last generation's, kept until the next commit (see form_next)
  bool need_new_generation_ = true;
  bool group_changed_ = false;
  bool has_state_ = true;  // a joiner has none until its first generation's transfer
  bool finished_ = false;  // a joiner that came after the training finished
  bool step_failed_ = false;
  std::string step_failure_;
  std::chrono::system_clock::time_point step_failed_at_{};
  uint64_t committed_ = 0;
  uint64_t steps_forgotten_ = 0;  // this generation's steps below it are deleted (forget)
  int64_t joiners_resolved_below_ = 1;  // waiting_joiners' cursor (generation.h)
  std::vector<FailureEvent> failures_;
  std::string keeps_failing_;  // the StepKeepsFailing message, once thrown: every later call throws it
};

// This rank's share [begin, end) of a global batch of `global` samples over `size` ranks:
// contiguous, the first (global % size) ranks one more.
std::pair<int64_t, int64_t> shard(int64_t global, int rank, int size);

}  // namespace ft
}  // namespace distcomm
