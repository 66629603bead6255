// The segments of one group as this rank sees them: its own, written here, and every
// peer's, mapped read-write from the peers' memfds (shm_rendezvous.h builds it).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/shm/cgroup_cpu_quota.h"
#include "backends/shm/shm_layout.h"
#include "api/plugin/process_watch.h"
#include "backends/shm/shm_populate_budget.h"
#include "backends/shm/shm_segment.h"

namespace distcomm {
namespace shm {

class MappedGroup {
 public:
  // segments[r] is rank r's segment; segments[rank] is this rank's own. watches[r] watches
  // rank r's process (not watching for this rank).
  // cpus_of_ranks: how many CPUs the ranks may run on together (shm_cpus.h; 0 unknown).
  // quota: this process's cgroup CPU quota, read once at creation (cgroup_cpu_quota.h).
  // populated: what mapping the segments in at creation took from the process's budget,
  // given back with them.
  MappedGroup(int rank, Layout layout, std::vector<Segment> segments, std::vector<int> pids,
              std::vector<ProcessWatch> watches, int cpus_of_ranks, CpuQuota quota, PopulateCharge populated);

  int rank() const { return rank_; }
  int size() const { return layout_.size(); }
  const Layout& layout() const { return layout_; }
  const SegmentView& self() const { return views_[static_cast<size_t>(rank_)]; }
  const SegmentView& of(int r) const { return views_[static_cast<size_t>(r)]; }
  // Whether rank r's process still runs: its pidfd (api/plugin/process_watch.h), or where the kernel has
  // none, its segment lock (which a child it forked also holds). Always true for self.
  bool alive(int r) const;
  // The peers whose processes have ended, of those `consider` accepts, in rank order: the
  // pidfds in one poll(), the segment locks of peers without one.
  std::vector<int> ended_peers(const std::function<bool(int)>& consider) const;
  // For a failure that names `peer` dead: the other peers whose processes have ended
  // without closing the group, in rank order. Two ranks killed together are both named, as
  // gloo names every closed connection, so that a program that goes on without them
  // excludes both (helper-68: shrink then waited its timeout for the second).
  std::vector<int> others_dead(int peer) const;
  // "; rank 2 (pid 8) has died too", "; ranks [2, 3] (pids 8, 9) have died too", "" for none.
  std::string dead_too_text(const std::vector<int>& ranks) const;
  int pid(int r) const { return pids_[static_cast<size_t>(r)]; }
  // The CPUs in the union of the ranks' affinity masks at creation; 0 when unknown.
  int cpus_of_ranks() const { return cpus_of_ranks_; }
  // This process's cgroup CPU quota as read at creation (the wait policy counts it).
  const CpuQuota& cpu_quota() const { return cpu_quota_; }

 private:
  const int rank_;
  const Layout layout_;
  PopulateCharge populated_;  // before segments_: given back once they are unmapped
  std::vector<Segment> segments_;
  std::vector<SegmentView> views_;
  std::vector<int> pids_;
  std::vector<ProcessWatch> watches_;
  int cpus_of_ranks_;
  CpuQuota cpu_quota_;
};

}  // namespace shm
}  // namespace distcomm
