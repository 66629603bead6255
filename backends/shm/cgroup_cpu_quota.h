// The CPUs a cgroup CPU quota lets this process's cgroup use, as Go (GOMAXPROCS), the JVM and
// .NET count them: ceil(quota / period). A pod given a CPU limit of 4 on a 64-core node gets
// a CFS quota of 400000 us a 100000 us period and no cpuset: its affinity mask still holds
// 64 CPUs, so 8 ranks counted 64, all spun while they waited, used up the quota, and the
// whole pod stood throttled for the rest of each period. shm_cpus.h takes the smaller of
// this and the CPUs of the masks.
//
// Where the quota is: the cgroup of this process (/proc/self/cgroup) in each hierarchy that
// can hold one (/proc/self/mountinfo): cgroup v1's with the cpu controller
// (cpu.cfs_quota_us, -1 for none, over cpu.cfs_period_us), cgroup v2's unified one (cpu.max,
// "400000 100000", or "max 100000" for none). The kernel enforces every ancestor's quota
// too (a pod's over its containers'), so the folders are read from the process's cgroup up
// to the mount's root and the tightest counts. A mount that does not show the process's
// cgroup (a container's own cgroup namespace shows "/"; a bind mount of the container's
// folder shows it at the mount point) is read where it shows it, else at its root.
//
// A mount hidden under a later one at the same mount point (mountinfo still lists it) is not
// read: a path built from it resolves through the mount on top.
//
// Quotas a cgroup namespace hides are not seen. A limit on a cgroup above the namespace's
// root (a pod's, over a container with a namespace and a cgroup mount of its own) is in no
// folder this process can name. Where `unshare -C` kept the host's mount, /proc/self/cgroup
// says "/" and the mount shows the host's root: the process's own cgroup cannot be found
// either, and the mount point (the host's root, no quota) is what is read. The workaround
// there: shm_spin_us=0 and shm_yield_us=0 (docs/shm.md).
//
// The parsing is pure (file contents in, counts out) for the unit tests; cgroup_cpu_quota()
// with no arguments reads the real files, once per group creation (shm_rendezvous.cc).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace distcomm {
namespace shm {

// A mount of a hierarchy that can hold a CPU quota.
struct CgroupMount {
  bool v2 = false;    // the unified hierarchy (cgroup2), else a v1 hierarchy with cpu
  std::string root;   // the cgroup it shows at its mount point (mountinfo's 4th field)
  std::string point;  // where it is mounted
};

// The mounts in /proc/self/mountinfo's text that can hold a CPU quota: cgroup v1 with the
// cpu controller among its options (cpu, or cpu,cpuacct; not cpuset), and cgroup2. Not one
// that a later line mounts over at the same point (overmounted: hidden, though listed).
// Other lines are passed over without being split (a host of 20,000 mounts: one look at the
// type and the mount point each).
std::vector<CgroupMount> cpu_quota_mounts(const std::string& mountinfo);

// This process's cgroup in a hierarchy, from /proc/self/cgroup's text: v1, the line whose
// controllers include cpu ("4:cpu,cpuacct:/kubepods/pod1"); v2, the "0::" line. Empty when
// there is none.
std::string own_cgroup(const std::string& proc_self_cgroup, bool v2);

// The folders whose quota limits a process in `cgroup`, innermost first, the mount point
// last. A cgroup outside the mount's root (or with ".." in it: moved out of its cgroup
// namespace) is not visible there: the mount point alone.
std::vector<std::string> quota_folders(const CgroupMount& mount, const std::string& cgroup);

// ceil(quota / period) of cgroup v1's cpu.cfs_quota_us and cpu.cfs_period_us texts; 0 for
// no quota (-1) or text that is not a positive number.
int quota_cpus_v1(const std::string& quota_us, const std::string& period_us);

// ceil(quota / period) of cgroup v2's cpu.max text ("400000 100000"); 0 for "max ..." (no
// quota) or text that is not two positive numbers.
int quota_cpus_v2(const std::string& cpu_max);

// A file's contents, nullopt where it cannot be read.
using ReadFile = std::function<std::optional<std::string>(const std::string& path)>;

// A quota and where it was read: what a log line says of it (shm's INFO line at group
// creation), so that nobody reads the files a second time to say it.
struct CpuQuota {
  int cpus = 0;                     // ceil(quota_us / period_us); 0: no quota
  unsigned long long quota_us = 0;  // the numbers as the folder's files give them
  unsigned long long period_us = 0;
  std::string folder;  // where: cpu.cfs_quota_us and cpu.cfs_period_us (v1) or cpu.max (v2) there
  // "1: 50000/100000 us at /sys/fs/cgroup/cpu/job", or "none".
  std::string describe() const;
};

// The tightest quota (the smallest quota / period; the innermost of equals) of every folder
// quota_folders() gives for every mount of cpu_quota_mounts(mountinfo), its files read
// through `read`; cpus 0 when none has a quota.
CpuQuota cgroup_cpu_quota(const std::string& proc_self_cgroup, const std::string& mountinfo, const ReadFile& read);

// The same for this process, from /proc/self/cgroup and /proc/self/mountinfo; cpus 0 when no
// quota limits it (or /proc does not say).
CpuQuota cgroup_cpu_quota();

// cgroup_cpu_quota(...).cpus: the tightest quota, in CPUs; 0 when none.
int cgroup_quota_cpus(const std::string& proc_self_cgroup, const std::string& mountinfo, const ReadFile& read);
int cgroup_quota_cpus();

}  // namespace shm
}  // namespace distcomm
