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

 private:
  void run();
  void tick();

  StorePtr store_;
  const std::string me_;
  const std::chrono::milliseconds interval_;
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
  std::thread thread_;
};

}  // namespace ft
}  // namespace distcomm
