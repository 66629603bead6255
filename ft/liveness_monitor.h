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
// A member whose heartbeat has not reached the store for heartbeat_timeout (partitioned
// from the store's host: its calls go unanswered) knows that the members that still reach
// the store take it for gone by that same bound, and fence it. It cannot read its dead
// mark, so it judges by its own silence: it aborts the step's group, so that an op blocked
// on peers that left it (a cut link brings no FIN: the op would wait its whole timeout)
// ends within seconds, and stops beating and judging (lost_store()); the Manager ends with
// that.
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
  // candidates), whose rendezvous a failed creation must also end.
  LivenessMonitor(StorePtr store, std::string me, std::chrono::milliseconds interval,
                  std::chrono::milliseconds heartbeat_timeout, std::vector<std::string> backends = {});
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
  // The last error of a store call ("" if none): the monitor goes on, and says why here.
  std::string last_error() const;
  // Why the others took this member for gone, once the monitor found its dead mark ("" until
  // then). From then on it only beats: it judges no other member, and it aborted the group
  // it watched.
  std::string fenced() const;
  // Why this member takes itself for lost to the job's store, once no heartbeat of it has
  // reached the store for heartbeat_timeout ("" until then): the others take it for gone by
  // then. From then on it makes no store call (its heartbeat stays stopped, so that the
  // others' verdict holds even if the store comes back), and it aborted the group it watched.
  std::string lost_store() const;
  // Training has ended here (Manager::finish): from now on it judges nothing, its own
  // store's silence included (the store may end with the job), and aborts nothing.
  void finish();

 private:
  using Clock = std::chrono::steady_clock;
  void run();
  void tick();
  // After a tick that failed with `error`: whether no heartbeat has reached the store for
  // heartbeat_timeout, and if so lost_store() and the abort.
  void judge_own_silence(const std::string& error);

  StorePtr store_;
  const std::string me_;
  const std::chrono::milliseconds interval_;
  const std::chrono::milliseconds heartbeat_timeout_;
  const std::vector<std::string> backends_;
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
  bool finished_ = false;
  std::thread thread_;
};

}  // namespace ft
}  // namespace distcomm
