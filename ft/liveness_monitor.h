// The thread that keeps a fault-tolerant member's heartbeat and watches the step under way:
// every interval it adds to hb/<me>, checks the members on this host by their processes
// (no store call) and its successor in the membership (the next member, cyclically) by dead
// mark and heartbeat, and, when one is gone, marks it dead, fences it (liveness.h: its
// launcher kills its process) and sets the step's verdict to "abort" naming it. When the
// step's verdict is "abort" (its own or another's) it aborts the step's group once, so that
// an op blocked on the dead member ends now, not at its timeout. A member that finds its
// own dead mark (it was stopped, and runs again) aborts its group and judges nobody any
// more. Watching only the successor across hosts keeps each member's store traffic
// constant in the job's size; every member is someone's successor.
//
// A member whose heartbeat has not reached the store for heartbeat_timeout cannot tell a
// partition (the members that still reach the store take it for gone by that same bound,
// and fence it) from a store that stalled for everyone (its process stopped or swapping:
// nobody is judged, a store's stall is no member's fault). It cannot read its dead mark,
// so it aborts the step's group, so that an op blocked on peers that may have left it (a
// cut link brings no FIN: the op would wait its whole timeout) ends within seconds, and
// keeps trying to beat. A beat that gets through settles it: its dead mark there, it is
// fenced (fenced()); none, it goes on, and the aborted step is redone (or applied, where
// every member had finished it). Only once no beat has got through for store_loss_timeout
// does it take itself for lost (lost_store()):
// it stops beating and judging, and the Manager ends with that. Then nothing of this member
// asks the store any more: its connections are cut off (cut_off_store), so that the
// group's teardown and a store call under way on the caller's thread (a commit's) fail at
// once; each would otherwise wait its own bound (seconds; a commit's call the op timeout)
// for a store that cannot answer (the member ended 12-43 s after its link was cut, where
// its monitor had judged it in 3). Every member of a job whose store stopped for 4 s used
// to take itself for lost at 3 s, and the whole job ended (an outside tester, 6 of 6).
// Its store calls are bounded each by heartbeat_timeout (its connection's timeout), and the
// first that fails ends the tick, so that a silent store holds this thread about that long.
//
// It has its own store connection: a TCPStore serves one request at a time, and the
// caller's thread waits on its own for whole steps.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "api/process_group.h"
#include "api/store/store.h"
#include "ft/liveness.h"

namespace distcomm {
namespace ft {

class LivenessMonitor {
 public:
  using SystemTime = std::chrono::system_clock::time_point;
  // backends: the plugins a generation's group may run (its spec's names, "auto"'s
  // candidates), whose rendezvous a failed creation must also end. cut_off_store, when
  // given, is called once this member takes itself for lost to the store (lost_store()),
  // with why, before the group's abort: it ends the member's use of the store (the Manager
  // cuts off its connections, TCPStore::cut_off), so that the abort's teardown and a call
  // under way on the caller's thread fail at once instead of each waiting for the silent
  // store. It must not throw.
  // store_loss_timeout: how long a member none of whose heartbeats reaches the store waits
  // for it before it takes itself for lost (lost_store()); the Manager's recovery_timeout.
  LivenessMonitor(StorePtr store, std::string me, std::chrono::milliseconds interval,
                  std::chrono::milliseconds heartbeat_timeout, std::chrono::milliseconds store_loss_timeout,
                  std::vector<std::string> backends = {}, std::function<void(const std::string&)> cut_off_store = {});
  ~LivenessMonitor();  // stops the thread (within one interval)
  LivenessMonitor(const LivenessMonitor&) = delete;
  LivenessMonitor& operator=(const LivenessMonitor&) = delete;

  // From now on, watch step `step` of generation `generation` (its members, in order) and
  // abort `group` if its verdict is "abort". A null group: the generation's group is being
  // made; a member found gone then also fails that creation for every member.
  void watch(uint64_t generation, uint64_t step, std::vector<std::string> members, ProcessGroupPtr group);
  // Watch nothing but keep the heartbeat (between generations, while forming one).
  void unwatch();
  // Aborts `group` (null: nothing), one caller at a time with this monitor's own aborts:
  // ProcessGroup::abort is not safe against a concurrent call on the same group (shm's
  // stall watch then joins its thread twice: std::system_error "Invalid argument").
  void abort_group(const ProcessGroupPtr& group);
  // When this monitor first saw the watched step's abort, if it has.
  std::optional<SystemTime> noticed_abort() const;
  // The last error of a store call since the last heartbeat that reached the store ("" if
  // none): the monitor goes on, and says why here.
  std::string last_error() const;
  // Why the others took this member for gone, once the monitor found its dead mark ("" until
  // then). From then on it only beats: it judges no other member, and it aborted the group
  // it watched.
  std::string fenced() const;
  // Why this member takes itself for lost to the job's store, once no heartbeat of it has
  // reached the store for store_loss_timeout ("" until then): the others took it for gone
  // long before, if they reach the store. From then on it makes no store call (its
  // connections are cut off), and it aborted the group it watched.
  std::string lost_store() const;
  // Whether this monitor aborted `group` for its own silence (no beat through for
  // heartbeat_timeout, judge_own_silence), and has neither found its dead mark nor taken
  // itself for lost: a stall of the store waited out, which an op of that group failed for
  // (a step's, or the next one's where the step itself had finished).
  bool aborted_for_waited_out_stall(const ProcessGroupPtr& group) const;
  // Training has ended here (Manager::finish): from now on it judges nothing, its own
  // store's silence included (the store may end with the job), and aborts nothing.
  void finish();

 private:
  using Clock = std::chrono::steady_clock;
  void run();
  void tick();
  // After a tick that failed with `error`: past heartbeat_timeout without a beat, the
  // step's group's abort (once); past store_loss_timeout, lost_store() too.
  void judge_own_silence(const std::string& error);
  // "ft: member '<me>': no heartbeat of it has reached the job's store for <silent> (...".
  std::string silence_words(Clock::duration silent, const std::string& error) const;

  StorePtr store_;
  const std::string me_;
  const std::chrono::milliseconds interval_;
  const std::chrono::milliseconds heartbeat_timeout_;
  const std::chrono::milliseconds store_loss_timeout_;
  const std::vector<std::string> backends_;
  const std::function<void(const std::string&)> cut_off_store_;
  Liveness liveness_;
  mutable std::mutex mu_;
  std::mutex abort_mu_;  // abort_group's
  std::condition_variable cv_;
  bool stop_ = false;
  bool watching_ = false;
  uint64_t generation_ = 0, step_ = 0;
  std::vector<std::string> members_;
  ProcessGroupPtr group_;
  bool aborted_ = false;
  std::optional<SystemTime> noticed_;
  std::string last_error_;
  std::string fenced_;
  Clock::time_point last_beat_;  // when the last heartbeat add returned (or the monitor began)
  std::string lost_store_;
  // Whether it aborted the step's group for its silence and no beat has got through since.
  bool blind_ = false;
  // The group it aborted for its silence, last (aborted_for_waited_out_stall); weak: it does
  // not keep it alive, and a later group at the same address is not taken for it.
  std::weak_ptr<ProcessGroup> silence_aborted_;
  bool finished_ = false;
  std::thread thread_;
};

}  // namespace ft
}  // namespace distcomm
