// Which CPUs a group's ranks may run on, for the one decision it feeds: how a waiting rank
// waits (shm_engine.cc, wait_phases() below). Spinning pays only while every rank can have a
// core of its own; with fewer cores than ranks a spinning rank takes the core the awaited one
// needs.
//
// A rank's own affinity mask says nothing about that: ranks pinned one to a core each (one
// CPU in every mask) can all spin, and ranks all pinned to one core cannot. So each rank
// publishes its mask at rendezvous and the group counts the CPUs of their union.
//
// The same count decides whether group creation populates memory (shm_rendezvous.cc): on a
// host with fewer CPUs than ranks, every rank's population waits for the cores they share.
// Both ask oversubscribed() below, so the two cannot disagree about one host.
//
// Both counts are also capped by this process's cgroup CPU quota (cgroup_cpu_quota.h:
// ceil(quota / period), the tightest of its cgroup and their ancestors): a Kubernetes pod
// limited to 4 CPUs of a 64-core node has a quota, no cpuset, and masks of 64 CPUs; 8 ranks
// spinning there use up the quota and the whole pod stands throttled for the rest of each
// 100 ms period. There the ranks do not yield-loop either (wait_phases()): the cores are
// free, and sched_yield returns at once.
#pragma once

#include <string>
#include <vector>

#include "backends/shm/cgroup_cpu_quota.h"

namespace distcomm {
namespace shm {

// The calling thread's affinity mask as a list of CPU numbers ("0,1,5"); empty when the
// system does not say.
std::string allowed_cpus_text();

// How many CPUs the union of masks (allowed_cpus_text() of each rank) holds; 0 when any
// mask is unknown.
int cpus_in_union(const std::vector<std::string>& masks);

// The CPUs the host has online (at least 1).
int online_cpus();

// The CPUs this host lets this process's job run on: its cgroup cpuset (a container given 4
// CPUs of a 64-core host: 4), however narrow this process's own mask is (a launcher, or
// the program, pinned it to one core). Read as what the kernel grants a thread of this
// process that asks for every CPU: sched_setaffinity keeps of a request only the CPUs of
// the caller's cpuset (cgroup v1 or v2 alike), and taskset is no bound (a process may widen
// its own mask again). The probe runs on a thread of its own, so no thread's mask changes.
// online_cpus() when the system does not say (or no thread can start).
int cpuset_cpus();

// The CPUs of this process's affinity mask, which a cgroup cpuset (a container given 2 CPUs
// of a 64-core host) and taskset both narrow; online_cpus() when the system does not say.
int affinity_cpus();

// cpus capped by a quota's count of CPUs (cgroup_quota_cpus(): 0 for none). Pure, for a
// unit test.
int within_quota(int cpus, int quota_cpus);

// The CPUs this process may use: its affinity mask's (affinity_cpus()), or fewer where its
// cgroup's CPU quota (cgroup v1 cpu.cfs_quota_us / cpu.cfs_period_us, v2 cpu.max) allows
// fewer: within_quota(affinity_cpus(), cgroup_quota_cpus()). Group creation's count.
int usable_cpus();
// The same with the quota already read (cgroup_cpu_quota().cpus): group creation reads it
// once, for this and for the wait policy.
int usable_cpus(int quota_cpus);

// Whether a host runs more ranks than they have CPUs: max(group_size, local_world_size) > cpus.
// local_world_size: the job's ranks on this host (the launcher's, 0 when unknown): a group
// of 2 among 64 ranks on 2 cores is oversubscribed though it alone would fit. cpus: what the
// ranks may use (usable_cpus(), or host_rank_cpus().cpus where the group's masks are known).
// Pure, for a unit test.
bool oversubscribed(int group_size, int local_world_size, int cpus);

// The CPUs the host's ranks may run on, as the spin decision counts them, from what one
// rank sees: own_cpus (affinity_cpus()), the union of the group's masks (0: unknown) and the
// CPUs the host lets the job use (cpuset_cpus()). Where the union is wider than this rank's
// own mask, the group's ranks were pinned to different CPUs (one a core, by a launcher or
// taskset) and the job's other ranks on the host presumably on others again, all within the
// cpuset: its CPUs count (the host's online CPUs did, so 8 ranks pinned apart in a 4-CPU
// container of a 64-core host spun on 4 cores). Otherwise (one shared mask: a cpuset, a
// container, no pinning) what this process may run on, or the union where larger. Pure,
// for a unit test.
int cpus_for_host_ranks(int own_cpus, int group_union, int cpuset);

// The CPUs the host's ranks may run on, as the wait policy counts them: `cpus` within the
// cgroup CPU quota, `cores` the same count without it (the two are equal where there is no
// quota or it allows as many). Where the quota alone leaves fewer CPUs than ranks, the cores
// are free while a rank waits: wait_phases() tells the two apart.
struct HostRankCpus {
  int cpus = 0;
  int cores = 0;
};

// {within_quota(cores, quota_cpus), cores}, cores = cpus_for_host_ranks(own_cpus,
// group_union, cpuset). The quota caps the result, not the mask it starts from: a rank's own
// count lowered by it would look narrower than the group's union, as if the ranks were
// pinned apart, and the cpuset would count instead. Pure, for a unit test.
HostRankCpus count_host_rank_cpus(int own_cpus, int group_union, int cpuset, int quota_cpus);

// count_host_rank_cpus(affinity_cpus(), group_union, cpuset_cpus(), cgroup_quota_cpus()):
// what the wait policy (shm_engine.cc) counts for a group whose masks' union holds
// group_union CPUs.
HostRankCpus host_rank_cpus(int group_union);
// The same with the quota already read (cgroup_cpu_quota().cpus).
HostRankCpus host_rank_cpus(int group_union, int quota_cpus);

// Which of a waiter's phases before its futex sleep (shm_wait.h) pay for a group of
// group_size ranks whose masks' union holds group_union CPUs (0: unknown), on a host running
// local_world_size of the job's ranks (0: unknown) with `cpus`:
// - spin, only where every rank can have a CPU while it waits: the union holds a CPU per
//   rank and the host is not oversubscribed within the quota;
// - yield, wherever the cores are what is short (a union narrower than the group, or more
//   ranks than cores): sched_yield then hands the core to a rank that waits for one, perhaps
//   the awaited one. Not where the quota alone is short (more ranks than the quota's CPUs,
//   not than the cores): the cores are free, sched_yield returns at once, and a yield loop
//   uses up the quota as a spin would (every wait shorter than shm_yield_us, most of a
//   small op's, was one).
// Pure, for a unit test.
struct WaitPhases {
  bool spin = false;
  bool yield = false;
};
WaitPhases wait_phases(int group_size, int group_union, int local_world_size, const HostRankCpus& cpus);

// What a group decided, and from what, for shm's one line at DISTCOMM_DEBUG=INFO when a group
// is created (shm_backend.cc): "2 ranks on this host, CPUs 1 (cores 2, the ranks' masks
// together 2, cgroup CPU quota 1: 50000/100000 us at /sys/fs/cgroup/cpu/job): waiters sleep
// at once (quota short)". spin_us / yield_us: the phases' lengths as the settings make them
// (0 where a phase does not pay); a setting that overrules `phases` is named. Pure, for a
// unit test.
std::string wait_decision_text(int group_size, int group_union, int local_world_size, const HostRankCpus& cpus,
                               const CpuQuota& quota, const WaitPhases& phases, long long spin_us, long long yield_us);

}  // namespace shm
}  // namespace distcomm
