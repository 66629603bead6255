#include "backends/shm/shm_engine.h"

#include <pthread.h>

#include <algorithm>
#include <cassert>
#include <thread>

#include "api/logging.h"
#include "api/process/thread_start.h"
#include "api/errors.h"
#include "api/diagnostics/progress_report.h"
#include "backends/shm/shm_cpus.h"

namespace distcomm {
namespace shm {
namespace {

// How often a waiter asks whether the peer it waits for is still alive, and so the longest
// it sleeps without looking.
constexpr std::chrono::milliseconds kLivenessInterval{10};
// Naps without pending ops before the progress thread sleeps until the next submit: a
// program issuing ops back to back never pays for waking it.
constexpr int kNapsBeforeSleep = 100;
// Naps with a thread waiting (and so polling: it runs every pending op, not only its own)
// and no op ending before the progress thread sleeps until no thread waits. A program's
// back-to-back ops end ops between naps, and never pay for waking it; a long wait (a barrier
// for a late rank) no longer costs a wake-up per nap: ~3% of a core per waiting rank, two
// thirds of one with 32 ranks on 2 cores (an outside measurement).
constexpr int kNapsBeforeParking = 10;
// How long a Desync's table waits for the ranks that have not reached the disagreeing round.
constexpr std::chrono::milliseconds kTableWait{1000};
// Polls that moved something between two looks at the deadlines and the peers' liveness
// (a clock read each): a poll that moves data takes microseconds, so a look comes well
// within a liveness interval.
constexpr uint64_t kProgressedPollsBetweenLooks = 64;
// How often the sleeping progress thread looks at the peers' processes: a peer that dies
// between ops is recorded within this (look_at_idle_peers), for a few system calls.
constexpr std::chrono::milliseconds kIdleWatch{500};
// How long a peer found dead between ops waits for others that went with it.
constexpr std::chrono::milliseconds kTogetherWindow{50};
// How long a waiter that could not poll (another thread does) waits for news.
constexpr std::chrono::microseconds kPollerWait{200};

// Spinning only helps when every rank can have a core while it waits; with more ranks than
// cores a spinning rank takes the core the awaited one needs. So: the group's ranks may run
// on at least as many CPUs as there are of them (the union of their masks: ranks pinned to
// one core each may spin, ranks pinned to one core together may not), and the host is not
// oversubscribed (shm_cpus.h, as group creation judges it): as many CPUs as it runs ranks
// (the launcher's count when known, else at least this group's), counted in what this
// process may run on, or the host's CPUs the job may use (its cpuset) where the group's
// ranks are pinned apart (8 ranks one a core in groups of 2: each mask is 1 CPU, the union
// 2, and the host has 8), within the cgroup CPU quota. Yielding helps where the cores are
// short, not where the quota alone is (wait_phases()): there a waiter sleeps on the futex at
// once, unless shm_yield_us was set (an explicit value is the user's choice, and holds).
// The quota is the one group creation read (MappedGroup::cpu_quota), not read again.
Engine::WaitDecision decide_waits(const ShmConfig& c, const MappedGroup& g) {
  const HostRankCpus cpus = host_rank_cpus(g.cpus_of_ranks(), g.cpu_quota().cpus);
  const WaitPhases phases = wait_phases(g.size(), g.cpus_of_ranks(), c.local_world_size, cpus);
  Engine::WaitDecision d;
  d.policy.spin = phases.spin ? std::chrono::nanoseconds(c.spin) : std::chrono::nanoseconds(0);
  d.policy.yield = phases.yield || c.yield_set ? std::chrono::nanoseconds(c.yield) : std::chrono::nanoseconds(0);
  using std::chrono::duration_cast;
  using std::chrono::microseconds;
  d.text = wait_decision_text(g.size(), g.cpus_of_ranks(), c.local_world_size, cpus, g.cpu_quota(), phases,
                              duration_cast<microseconds>(d.policy.spin).count(),
                              duration_cast<microseconds>(d.policy.yield).count());
  return d;
}

}  // namespace

// The completions whose callbacks this thread is running, innermost first. A callback may
// wait for an op that ended in the same poll: its Work is further down the batch, ended but
// not yet finished, and would be finished only after the callback returns -- with no op in
// flight, no deadline would end that wait (helper-66 found it hang). wait_for() finishes it
// then, with the batch's entries before it, in order.
namespace {

struct CompletingBatch {
  std::vector<Completion>* list;
  size_t next;  // the first entry not finished yet
  CompletingBatch* outer;
};
// This thread's engine state, in one trivially destructible thread_local: in a plugin (a
// dlopen'ed library) every thread_local variable a function touches costs a
// __tls_get_addr call, and the per-op path touched five. Trivially destructible, so it
// stays readable for the thread's whole life (see ReusedDoneList).
struct ThreadState {
  CompletingBatch* completing = nullptr;  // the completions this thread runs, innermost
  bool done_list_busy = false;             // a DoneList of this thread uses `reused`
  bool reused_gone = false;                // the thread's ReusedDoneList is destroyed
  std::vector<Completion>* reused = nullptr;  // its list, once made
};
thread_local ThreadState t_state;

void finish_entry(Completion& c) {
  const WorkPtr work = std::move(c.work);  // empty now: the batch skips it
  if (!work) return;
  if (c.source >= 0) work->set_source_rank(c.source);
  try {
    work->finish(c.error);
  } catch (...) {
    // A callback that throws is the caller's bug; it must not stop the other completions
    // or escape the progress thread. Works chained through then() carry such errors.
  }
}

// Finishes `work` if this thread holds it in a batch, with the entries before it; says
// whether it did.
bool finish_if_completing(const Work& work) {
  for (CompletingBatch* b = t_state.completing; b != nullptr; b = b->outer) {
    for (size_t i = b->next; i < b->list->size(); ++i) {
      if ((*b->list)[i].work.get() != &work) continue;
      while (b->next <= i) finish_entry((*b->list)[b->next++]);
      return true;
    }
  }
  return false;
}

}  // namespace

// The thread's reused list of completions (Engine::DoneList), and whether it has been
// destroyed: exit() destroys the main thread's thread_local objects before it runs the
// atexit handlers, and a program whose handler runs an op (a group made again at exit) wrote
// into the freed vector ("free(): invalid pointer" as the group ended). Its flag is in
// t_state, which is trivially destructible, so it stays readable for the thread's whole life.
namespace {
struct ReusedDoneList {
  std::vector<Completion> list;
  ~ReusedDoneList() {
    t_state.reused_gone = true;
    t_state.reused = nullptr;
  }
};
}  // namespace

// A drive() collects completions in a vector and runs them after releasing the progress
// lock. The thread's outermost drive() reuses one (an op issued and waited for costs no
// allocation here); a drive() from inside a completion's callback, or after the thread's
// reused one is gone, gets its own.
class Engine::DoneList {
 public:
  DoneList() : DoneList(t_state) {}
  ~DoneList() {
    if (owner_) state_.done_list_busy = false;
  }
  std::vector<Completion>& get() { return list_; }

 private:
  explicit DoneList(ThreadState& state)
      : state_(state), owner_(!state.done_list_busy && !state.reused_gone), list_(owner_ ? reused(state) : own_) {
    state.done_list_busy = true;
  }
  static std::vector<Completion>& reused(ThreadState& state) {
    if (state.reused == nullptr) {
      thread_local ReusedDoneList reused;
      state.reused = &reused.list;
    }
    return *state.reused;
  }
  ThreadState& state_;
  const bool owner_;
  std::vector<Completion> own_;
  std::vector<Completion>& list_;
};

Engine::Engine(std::unique_ptr<MappedGroup> group, const ShmConfig& config, StorePtr board)
    : group_(std::move(group)),
      config_(config),
      decision_(decide_waits(config, *group_)),
      // Peers waiting on this rank learn of a failure through its segment (within a wake-up);
      // the store is where a rank looks up the cause of a failure it only saw (and where a
      // rank that waits for nobody, or another backend's tool, finds it).
      failure_(group_->rank(), std::move(board)),
      cursor_(*group_),
      p2p_(*group_) {}

Engine::~Engine() {
  shutdown();
  if (!thread_.joinable()) return;
  // The progress thread has left its loop (it held a reference until then), or this is that
  // thread dropping the last reference as it ends.
  if (thread_.get_id() == std::this_thread::get_id()) {
    thread_.detach();
  } else {
    thread_.join();
  }
}

void Engine::start() {
  failure_.on_abort([this] {
    if (auto first = failure_.first()) publish_failure(*group_, *first);
  });
  // A limit on threads (ulimit -u, a container's pids.max, ulimit -v) fails here: the
  // error names the thread and the limits, and the plugin's loader the rank and group.
  thread_ = start_thread("the shm backend's progress thread (rank " + std::to_string(group_->rank()) + ")",
                         [self = shared_from_this()] {
                           // Nothing leaves a thread (std::terminate would abort the rank
                           // without a word): one line, and the ops end by their timeouts.
                           try {
                             self->progress_loop();
                           } catch (...) {
                             log_line("distcomm: shm: the progress thread of rank " +
                                      std::to_string(self->group_->rank()) + " stopped: " +
                                      message_of(std::current_exception()) +
                                      "; this group's ops progress only while a thread waits for them, and may end "
                                      "by their timeouts");
                           }
                         });
  pthread_setname_np(thread_.native_handle(), "dc-shm-progress");
}

template <typename Item>
void Engine::enqueue(std::vector<Item>& queue, Item&& item) {
  WorkPtr work = item.work;
  {
    std::lock_guard<std::mutex> lock(submit_mu_);
    if (!failure_.failed()) {
      pending_.fetch_add(1);
      queue.push_back(std::move(item));
      has_new_.store(true, std::memory_order_release);
      work.reset();
    }
  }
  if (work) return work->finish(failure_.refusal());
  wake_progress_thread();
}

void Engine::submit(CollectiveTask&& task, const Tensor& out, const Tensor& in) {
  // The issuing thread starts the op itself when no thread is polling and nothing is queued
  // before it: its first round is written and posted now, with no queue on the way.
  std::unique_lock<std::mutex> lock(progress_mu_, std::try_to_lock);
  if (!lock.owns_lock() || has_new_.load(std::memory_order_acquire) || failure_.failed()) {
    if (lock.owns_lock()) lock.unlock();
    task.hold(out, in);  // another thread runs it, maybe after this call has returned
    return enqueue(new_collectives_, std::move(task));  // refuses it after a failure
  }
  pending_.fetch_add(1);
  const Work* const work = task.work.get();
  const size_t ahead = collectives_.size();
  const uint64_t pops = collectives_.pops();
  collectives_.push_back(std::move(task));
  DoneList list;
  std::vector<Completion>& done = list.get();
  poll(done, /*look_when_blocked=*/false);  // a waiter or the progress thread goes on
  // Still queued (ops leave from the front only): from the unlock on, other threads run it,
  // and the caller may let its tensors go once this returns.
  const uint64_t popped = collectives_.pops() - pops;
  if (popped <= ahead) {
    CollectiveTask& mine = collectives_[ahead - popped];
    assert(mine.work.get() == work);
    (void)work;
    mine.hold(out, in);
  }
  lock.unlock();
  complete(done);
  wake_progress_thread();
}

void Engine::submit(P2PRequest request) { enqueue(new_requests_, std::move(request)); }

void Engine::wake_progress_thread() {
  if (!thread_asleep_.load()) return;
  std::lock_guard<std::mutex> lock(thread_mu_);
  thread_cv_.notify_one();
}

void Engine::take_submissions(std::vector<Completion>& done) {
  if (!has_new_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(submit_mu_);  // moves only: short
  for (auto& t : new_collectives_) collectives_.push_back(std::move(t));
  new_collectives_.clear();
  for (auto& r : new_requests_) p2p_.add(std::move(r), done);
  new_requests_.clear();
  has_new_.store(false, std::memory_order_relaxed);
}

Engine::Poll Engine::poll(std::vector<Completion>& done, bool look_when_blocked) {
  // Written by the poller alone (progress_mu_ orders one poller after the next): a plain
  // load and store, not a locked read-modify-write on every poll. The progress thread only
  // compares it between naps.
  polls_.store(polls_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  Poll result;
  Blocker collective_blocker;
  bool p2p_pending = false;
  try {
    take_submissions(done);
    if (failure_.failed() && follow_recorded_failure(done)) {
      result.progressed = true;
      result.blocker = p2p_.blocker();
      return result;
    }
    result.progressed = advance_collectives(done, &collective_blocker);
    p2p_pending = !p2p_.idle();
    if (p2p_pending) result.progressed |= p2p_.progress(done);
    // Also while something moves, now and then: steady traffic to one peer must not hide an
    // op stuck on another (dead) one, or a deadline that has passed.
    const bool look = !result.progressed || ++progressed_polls_ % kProgressedPollsBetweenLooks == 0;
    if (look_when_blocked && look && (!collectives_.empty() || p2p_pending)) {
      result.now = Clock::now();
      check_blocked(collective_blocker, result.now, &result);
    }
  } catch (const GroupFailedError& e) {
    fail_group(e.failure(), done);
    result.progressed = true;
  } catch (const std::exception& e) {
    fail_group({FailureKind::kOther, -1, std::string("shm: ") + e.what()}, done);
    result.progressed = true;
  }
  result.blocker = collectives_.empty() ? p2p_.blocker() : with_doorbell(collective_blocker, p2p_pending);
  return result;
}

bool Engine::advance_collectives(std::vector<Completion>& done, Blocker* blocker) {
  bool progressed = false;
  const int rank = group_->rank(), size = group_->size();
  while (!collectives_.empty() && !stopping_.load(std::memory_order_relaxed)) {
    CollectiveTask& t = collectives_.front();
    if (!t.started) {
      check_peers_usable();
      group_->self().control().current.op = t.description;  // before the op's first post
      t.started = true;
    }
    // An op with nothing to move (0 elements) still takes one empty round, so that it is
    // marked and checked against the peers' like any other.
    const bool empty = t.op->rounds() == 0;
    const uint64_t rounds = empty ? 1 : t.op->rounds();
    if (t.round >= rounds) {
      t.op.reset();  // before its Work may go: it may live in the Work's memory
      done.push_back({std::move(t.work), nullptr, -1});
      collectives_.pop_front();
      progressed = true;
      continue;
    }
    RoundView v;
    v.rank = rank;
    v.size = size;
    v.round = cursor_.round();
    v.in_line = empty || t.op->round_bytes(t.round) <= kInlineBytes;
    v.mine = v.in_line ? cursor_.my_inline(v.round) : cursor_.my_slot(v.round);
    v.next = cursor_.my_slot(v.round + 1);
    v.cursor = &cursor_;
    if (!t.written) {
      if (!cursor_.may_write(v.round, blocker)) return progressed;
      if (!empty) t.op->write(t.round, v);
      cursor_.mark(v.round, t.agreement);
      cursor_.post();
      t.written = true;
      progressed = true;
    }
    // The last round also waits for every peer's mark, where the op reads nothing of that
    // peer (a broadcast's root, reduce's senders): no rank ends an op that a peer runs
    // differently. It waits only for the peers to start that round, not to finish it.
    const bool last = t.round + 1 == rounds;
    for (int p = 0; p < size; ++p) {
      if (p == rank || !(last || (!empty && t.op->waits_for(t.round, p)))) continue;
      const bool ready = v.in_line ? cursor_.tagged(p, v.round, blocker) : cursor_.reached(p, v.round + 1, blocker);
      if (!ready) return progressed;
      if (cursor_.op_of(p, v.round) != t.agreement) mismatch(t, p);
    }
    std::exception_ptr agreed;
    try {
      if (!empty) t.op->read(t.round, v);
    } catch (const AgreedError&) {
      agreed = std::current_exception();
    }
    cursor_.advance();
    ++t.round;
    t.written = false;
    progressed = true;
    if (agreed) {
      done.push_back({t.work, agreed, -1});
      collectives_.pop_front();
    }
  }
  return progressed;
}

Blocker Engine::with_doorbell(const Blocker& collective_blocker, bool p2p_pending) const {
  // p2p_pending as this poll began: a transfer that ended in it costs at most a spurious ring.
  if (!p2p_pending) return collective_blocker;
  const Blocker bell = p2p_.blocker();
  if (!collective_blocker.word) return bell;
  Blocker b = collective_blocker;
  b.bell = bell.word;
  b.bell_sleepers = bell.sleepers;
  b.bell_seen = bell.seen;
  b.bell_round_of = &group_->self().control().doorbell.round_of;
  return b;
}

void Engine::check_blocked(const Blocker& collective_blocker, Clock::time_point now, Poll* result) {
  const bool check_liveness = now >= next_liveness_check_;
  if (check_liveness) next_liveness_check_ = now + kLivenessInterval;
  result->wake_by = next_liveness_check_;
  // Every queued op's own deadline, the running one's and those behind it.
  for (size_t i = 0; i < collectives_.size(); ++i) {
    const CollectiveTask& t = collectives_[i];
    if (now >= t.deadline) {
      throw GroupFailedError({FailureKind::kTimeout, t.started ? collective_blocker.peer : -1,
                              "did not finish within its timeout of " + std::to_string(t.timeout.count()) +
                                  " ms, counted from when it was issued" +
                                  (t.started ? " (round " + std::to_string(t.round + 1) + " of " +
                                                   std::to_string(t.op->rounds()) + ", waiting for " +
                                                   (collective_blocker.peer >= 0
                                                        ? "rank " + std::to_string(collective_blocker.peer)
                                                        : std::string("a peer")) +
                                                   ")"
                                             : std::string(" (it waited behind earlier ops of the group)")),
                              t.work.get()});
    }
    result->wake_by = std::min(result->wake_by, t.deadline);
  }
  if (!collectives_.empty() && collectives_.front().started) {
    const int peer = collective_blocker.peer;
    // A changed word means news since the last look: poll again before judging.
    const bool news = collective_blocker.word &&
                      collective_blocker.word->load(std::memory_order_acquire) != collective_blocker.seen;
    if (check_liveness && peer >= 0 && !news && !group_->alive(peer)) {
      throw GroupFailedError(peer_died(*group_, peer, "died: its process ended while this op waited for it"));
    }
  }
  if (!p2p_.idle()) {
    p2p_.check(now, check_liveness);
    result->wake_by = std::min(result->wake_by, p2p_.next_deadline());
  }
}

void Engine::mismatch(const CollectiveTask& t, int peer) const {
  // Every rank whose mark for this round is there has its op line written (before its
  // post) and cannot move past that op. The table waits a little for the ranks that have
  // not reached this point (a late rank's op belongs in it), never past the op's deadline.
  const uint64_t round = cursor_.round();
  auto marked = [&](int r) {
    return r == group_->rank() || group_->of(r).inline_line(round).tag.load(std::memory_order_acquire) == round + 1;
  };
  const Clock::time_point until = std::min(Clock::now() + kTableWait, t.deadline);
  for (;;) {
    bool all = true;
    for (int r = 0; r < group_->size(); ++r) {
      all = all && (marked(r) || group_->of(r).state().load(std::memory_order_acquire) != kActive);
    }
    if (all || Clock::now() >= until) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::vector<std::optional<OpFingerprint>> by_rank(static_cast<size_t>(group_->size()));
  for (int r = 0; r < group_->size(); ++r) {
    if (r == group_->rank()) {
      by_rank[r] = fingerprint_of(t.description);
    } else if (marked(r)) {
      by_rank[r] = fingerprint_of(group_->of(r).control().current.op);
    }
  }
  throw GroupFailedError(
      {FailureKind::kDesync, -1,
       desync_message(t.description.seq, fingerprint_table(by_rank, "(has not reached this point yet)"), "") +
           "\n(found by rank " + std::to_string(group_->rank()) + " at round " + std::to_string(t.round + 1) + " of " +
           std::to_string(t.op->rounds()) + " of its op, reading rank " + std::to_string(peer) +
           "'s; no data was exchanged)",
       t.work.get()});
}

void Engine::check_peers_usable() const {
  // A peer that failed may have posted this round before it did: its data would still be
  // read, but the group is broken, and every later op must fail on every rank.
  for (int p = 0; p < group_->size(); ++p) {
    const SegmentView& v = group_->of(p);
    if (p != group_->rank() && v.state().load(std::memory_order_acquire) == kFailed) {
      throw GroupFailedError(failure_of_peer(v, p));
    }
  }
}

const Work* Engine::running_op() const {
  if (collectives_.empty() || !collectives_.front().started) return nullptr;
  return collectives_.front().work.get();
}

void Engine::fail_group(const Failure& seen, std::vector<Completion>& done) {
  // Dead peers that their launcher stopped after another rank failed are no culprits.
  const Failure failure = with_launcher_stops(seen, *group_, failure_);
  const Work* op = failure.op ? failure.op : running_op();
  std::exception_ptr error = to_exception(failure);
  // A PeerFailure naming its culprit (a dead pid, a peer's close) is recorded at once: one
  // look at the board, no explanation (GroupFailure::record).
  const std::exception_ptr first =
      op ? failure_.record(error, *op, failure.culprit) : failure_.record(error, "", failure.culprit);
  const std::exception_ptr rest = failure_.refusal();
  // The op whose failure it is ends with it; every other op, the running one included, with
  // the refusal that quotes it: an op cut off because a later one's own deadline passed (or
  // a transfer failed) must not report that op's timeout as its own (gloo and mpi say "the
  // group is unusable since an earlier failure" there too). A failure that is no op's (there
  // is none in flight) ends what is under way with itself.
  fail_everything([&](const Work& w, bool started) { return (op ? &w == op : started) ? first : rest; }, done);
}

bool Engine::follow_recorded_failure(std::vector<Completion>& done) {
  if (collectives_.empty() && p2p_.idle()) return false;
  const auto cut_off = std::make_exception_ptr(PeerFailure("the group failed while this op was queued or running"));
  // record() answers the op whose failure came first with that failure, others with the refusal.
  fail_everything([&](const Work& w, bool) { return failure_.record(cut_off, w); }, done);
  return true;
}

void Engine::fail_everything(const ErrorFor& error_for, std::vector<Completion>& done) {
  for (size_t i = 0; i < collectives_.size(); ++i) {
    const CollectiveTask& t = collectives_[i];
    done.push_back({t.work, error_for(*t.work, t.started), -1});
  }
  collectives_.clear();
  p2p_.fail_all([&](const Work& w) { return error_for(w, true); }, done);
  std::lock_guard<std::mutex> lock(submit_mu_);  // failure_ refuses new ops from here on
  for (const CollectiveTask& t : new_collectives_) done.push_back({t.work, error_for(*t.work, false), -1});
  for (const P2PRequest& r : new_requests_) done.push_back({r.work, error_for(*r.work, false), -1});
  new_collectives_.clear();
  new_requests_.clear();
}

void Engine::complete(std::vector<Completion>& done) {
  if (done.empty()) return;
  ThreadState& state = t_state;
  CompletingBatch batch{&done, 0, state.completing};
  struct Linked {  // off the chain however this frame ends: the chain must not outlive it
    ThreadState& state;
    CompletingBatch& b;
    Linked(ThreadState& s, CompletingBatch& batch) : state(s), b(batch) { state.completing = &b; }
    ~Linked() { state.completing = b.outer; }
  } linked(state, batch);
  while (batch.next < done.size()) finish_entry(done[batch.next++]);
  pending_.fetch_sub(static_cast<int64_t>(done.size()));
  completed_.fetch_add(done.size(), std::memory_order_relaxed);
  done.clear();
  if (waiters_.load() > 0) {
    std::lock_guard<std::mutex> lock(done_mu_);
    done_cv_.notify_all();
  }
}

template <typename Stop>
bool Engine::drive(Stop stop, Clock::time_point give_up) {
  Backoff backoff(decision_.policy);
  DoneList list;
  std::vector<Completion>& done = list.get();
  for (;;) {
    std::unique_lock<std::mutex> lock(progress_mu_, std::try_to_lock);
    if (!lock.owns_lock()) {
      {
        std::unique_lock<std::mutex> wait_lock(done_mu_);
        done_cv_.wait_for(wait_lock, kPollerWait);
      }
      if (stop()) return true;
      if (Clock::now() >= give_up) return false;
      continue;
    }
    const Poll r = poll(done);
    lock.unlock();
    complete(done);
    if (stop()) return true;
    if (r.progressed) {
      backoff.reset();
      continue;
    }
    const Clock::time_point now = r.now != Clock::time_point() ? r.now : Clock::now();
    if (now >= give_up) return false;
    const Clock::time_point until = std::min(r.wake_by, give_up);
    backoff.idle(r.blocker, now, std::min<Clock::duration>(until - now, kLivenessInterval));
  }
}

bool Engine::wait_for(const Work& work, std::chrono::milliseconds timeout) {
  if (finish_if_completing(work)) return true;
  const Clock::time_point give_up =
      is_use_default(timeout) ? Clock::time_point::max() : Clock::now() + timeout;
  struct Waiting {
    Engine& engine;
    explicit Waiting(Engine& e) : engine(e) { engine.waiters_.fetch_add(1); }
    ~Waiting() {
      // The last waiter wakes a progress thread that sleeps for it (both atomics seq_cst:
      // either this sees the thread parked, or the thread sees no waiter left).
      if (engine.waiters_.fetch_sub(1) == 1 && engine.parked_for_waiters_.load()) {
        std::lock_guard<std::mutex> lock(engine.thread_mu_);
        engine.thread_cv_.notify_one();
      }
    }
  } waiting(*this);
  return drive([&] { return work.is_completed(); }, give_up);
}

void Engine::progress_loop() {
  std::unique_lock<std::mutex> lock(thread_mu_);
  int idle_naps = 0;
  int waited_naps = 0;
  uint64_t completed_at_last_nap = 0;
  while (!stopping_.load()) {
    if (pending_.load() == 0 && idle_naps >= kNapsBeforeSleep) {
      // Idle for a while: sleep until an op is submitted (submit() wakes this thread then;
      // while it naps, submitting costs no system call).
      thread_asleep_.store(true);
      while (!thread_cv_.wait_for(lock, kIdleWatch, [&] { return stopping_.load() || pending_.load() > 0; })) {
        lock.unlock();
        look_at_idle_peers();
        lock.lock();
      }
      thread_asleep_.store(false);
      idle_naps = 0;
      continue;
    }
    // Give a waiting thread the chance to run pending ops without a hand-off.
    const uint64_t polls = polls_.load();
    thread_cv_.wait_for(lock, config_.nap, [&] { return stopping_.load(); });
    if (stopping_.load()) break;
    if (pending_.load() == 0) {
      ++idle_naps;
      continue;
    }
    idle_naps = 0;
    // Ops ending between naps: a program running op after op, not one long wait.
    const uint64_t completed = completed_.load(std::memory_order_relaxed);
    if (completed != completed_at_last_nap) waited_naps = 0;
    completed_at_last_nap = completed;
    if (waiters_.load() > 0 && ++waited_naps >= kNapsBeforeParking) {
      // Until the last waiter leaves (wait_for wakes this thread then); kIdleWatch bounds it
      // all the same.
      parked_for_waiters_.store(true);
      thread_cv_.wait_for(lock, kIdleWatch, [&] { return stopping_.load() || waiters_.load() == 0; });
      parked_for_waiters_.store(false);
      waited_naps = 0;
      continue;
    }
    if (waiters_.load() > 0 || polls_.load() != polls) continue;
    waited_naps = 0;
    lock.unlock();
    drive([&] { return stopping_.load() || pending_.load() == 0 || waiters_.load() > 0; },
          Clock::time_point::max());
    {
      std::lock_guard<std::mutex> done_lock(done_mu_);  // a waiter may have parked while this thread polled
      done_cv_.notify_all();
    }
    lock.lock();
  }
}

void Engine::look_at_idle_peers() {
  if (failure_.failed()) return;
  // A peer that closed the group (it left cleanly) or failed (it published why) is no
  // news; nor is one whose process lives.
  const std::vector<int> ended = group_->ended_peers(
      [this](int p) { return group_->of(p).state().load(std::memory_order_acquire) == kActive; });
  // Ranks that go together (a killed job step, the OOM killer) end within milliseconds of
  // each other: a moment's wait lets the failure name all of them (peer_died), not the
  // first alone. Nothing waits on this group meanwhile; an op issued now looks for itself.
  if (!ended.empty()) std::this_thread::sleep_for(kTogetherWindow);
  for (int p : ended) {
    std::unique_lock<std::mutex> progress(progress_mu_, std::try_to_lock);
    if (!progress.owns_lock() || pending_.load() > 0) return;  // an op runs: its own waits look at the peers
    DoneList list;
    std::vector<Completion>& done = list.get();
    fail_group(peer_died(*group_, p,
                         "died: its process ended (seen while this rank had no op in flight on the group; it may "
                         "have been in one)"),
               done);
    progress.unlock();
    complete(done);
    return;
  }
}

void Engine::warn_of_sends_not_taken() {
  // Only a group that has not failed: after a failure its peers' receives ended with it.
  if (failure_.failed()) return;
  // A destination still active may be about to take it (its receive posted just now, as
  // this rank's send completed at once): a moment for it, which ends as soon as every send
  // is taken or that rank leaves too.
  const auto until = Clock::now() + std::chrono::milliseconds(1000);
  while (p2p_.sends_awaited() && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const std::vector<std::string> lost = p2p_.sends_not_taken();
  if (lost.empty()) return;
  // "group 'world' send p2p#0 (...) to rank 1, tag 0, 32 bytes": the group once, in front.
  std::string group = "this group";
  std::string named;
  for (size_t i = 0; i < lost.size() && i < 3; ++i) {
    std::string what = lost[i];
    const size_t send_at = what.find(" send ");
    if (what.rfind("group '", 0) == 0 && send_at != std::string::npos) {
      group = what.substr(0, send_at);
      what = what.substr(send_at + 1);
    }
    named += (i ? ", " : "") + what;
  }
  if (lost.size() > 3) named += ", ...";
  // As the core warns of ops a destroyed group cut off (process_group_debug.cc): an shm send
  // completes once its message is in shared memory, so it is never one of those.
  log_line_as(group_->rank(), group_->size(),
              "distcomm: " + group + " destroyed with " + std::to_string(lost.size()) +
                  (lost.size() == 1 ? " send" : " sends") + " that no receive took (" + named +
                  "): an shm send completes once its message is in shared memory, so its wait() could not tell; "
                  "the message is lost. Post the matching recv() on the destination before the group goes");
}

void Engine::shutdown() {
  if (stopping_.exchange(true)) return;
  {
    std::lock_guard<std::mutex> lock(thread_mu_);
    thread_cv_.notify_all();
  }
  // On the progress thread itself (a Work callback aborts or destroys the group), it ends
  // when the callback returns: it sees stopping_ then.
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
  std::vector<Completion> done;
  {
    std::lock_guard<std::mutex> lock(progress_mu_);  // a poll checks stopping_ every round: short
    warn_of_sends_not_taken();
    // With ops in flight, peers may be in them: the abort hook tells them (kFailed);
    // otherwise this is a clean close (kClosed).
    const bool in_flight = !collectives_.empty() || !p2p_.idle() || has_new_.load();
    failure_.shut_down(std::make_exception_ptr(PeerFailure(
                           "the group was shut down on this rank (ProcessGroup::abort or destruction)")),
                       [in_flight] { return in_flight; });
    publish_close(*group_);
    const auto error = std::make_exception_ptr(PeerFailure(
        "the group was shut down on this rank (ProcessGroup::abort or destruction) while this op was in flight"));
    fail_everything([&](const Work&, bool) { return error; }, done);
  }
  complete(done);
}

}  // namespace shm
}  // namespace distcomm
