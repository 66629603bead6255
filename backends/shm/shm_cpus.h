// Which CPUs a group's ranks may run on, for the one decision it feeds: whether a waiting
// rank may spin (shm_engine.cc). Spinning pays only while every rank can have a core of
// its own; with fewer cores than ranks a spinning rank takes the core the awaited one needs.
//
// A rank's own affinity mask says nothing about that: ranks pinned one to a core each (one
// CPU in every mask) can all spin, and ranks all pinned to one core cannot. So each rank
// publishes its mask at rendezvous and the group counts the CPUs of their union.
//
// The same count decides whether group creation populates memory (shm_rendezvous.cc): on a
// host with fewer CPUs than ranks, every rank's population waits for the cores they share.
// Both ask oversubscribed() below, so the two cannot disagree about one host.
#pragma once

#include <string>
#include <vector>

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

// The CPUs this process may run on: its affinity mask, which a cgroup cpuset (a container
// given 2 CPUs of a 64-core host) and taskset both narrow; online_cpus() when the system does
// not say. A CPU quota (cpu.max) is not a mask and is not seen.
int usable_cpus();

// Whether a host runs more ranks than they have CPUs: max(group_size, local_world_size) > cpus.
// local_world_size: the job's ranks on this host (the launcher's, 0 when unknown): a group
// of 2 among 64 ranks on 2 cores is oversubscribed though it alone would fit. cpus: what the
// ranks may run on (usable_cpus(), or more where the group's masks are known to cover more).
// Pure, for a unit test.
bool oversubscribed(int group_size, int local_world_size, int cpus);

// The CPUs the host's ranks may run on, as the spin decision counts them, from what one
// rank sees: own_cpus (usable_cpus()), the union of the group's masks (0: unknown) and the
// CPUs the host lets the job use (cpuset_cpus()). Where the union is wider than this rank's
// own mask, the group's ranks were pinned to different CPUs (one a core, by a launcher or
// taskset) and the job's other ranks on the host presumably on others again, all within the
// cpuset: its CPUs count (the host's online CPUs did, so 8 ranks pinned apart in a 4-CPU
// container of a 64-core host spun on 4 cores). Otherwise (one shared mask: a cpuset, a
// container, no pinning) what this process may run on, or the union where larger. Pure,
// for a unit test.
int cpus_for_host_ranks(int own_cpus, int group_union, int cpuset);

// cpus_for_host_ranks(usable_cpus(), group_union, cpuset_cpus()): what the spin policy
// (shm_engine.cc) counts for a group whose masks' union holds group_union CPUs.
int host_rank_cpus(int group_union);

}  // namespace shm
}  // namespace distcomm
