#include "backends/shm/shm_cpus.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <sstream>
#include <system_error>
#include <thread>

#include "backends/shm/cgroup_cpu_quota.h"

namespace distcomm {
namespace shm {

std::string allowed_cpus_text() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return "";
  std::string text;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    if (!text.empty()) text += ",";
    text += std::to_string(cpu);
  }
  return text;
}

int cpus_in_union(const std::vector<std::string>& masks) {
  std::set<int> cpus;
  for (const std::string& mask : masks) {
    if (mask.empty()) return 0;
    std::istringstream in(mask);
    for (std::string cpu; std::getline(in, cpu, ',');) cpus.insert(std::stoi(cpu));
  }
  return static_cast<int>(cpus.size());
}

int online_cpus() {
  const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

int affinity_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return online_cpus();
  const int n = CPU_COUNT(&set);
  return n > 0 ? n : online_cpus();
}

int within_quota(int cpus, int quota_cpus) { return quota_cpus > 0 ? std::min(cpus, quota_cpus) : cpus; }

int usable_cpus() { return usable_cpus(cgroup_quota_cpus()); }

int usable_cpus(int quota_cpus) { return within_quota(affinity_cpus(), quota_cpus); }

int cpuset_cpus() {
  int granted = 0;
  try {
    // A thread of its own: widening the caller's mask, even for a moment, would let it run
    // where a launcher pinned it not to.
    std::thread probe([&granted] {
      cpu_set_t all;
      CPU_ZERO(&all);
      for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) CPU_SET(cpu, &all);
      if (::sched_setaffinity(0, sizeof(all), &all) != 0) return;
      cpu_set_t got;
      CPU_ZERO(&got);
      if (::sched_getaffinity(0, sizeof(got), &got) == 0) granted = CPU_COUNT(&got);
    });
    probe.join();
  } catch (const std::system_error&) {
    // No thread (a limit on threads): the host's count, as before there was a probe.
  }
  return granted > 0 ? granted : online_cpus();
}

bool oversubscribed(int group_size, int local_world_size, int cpus) {
  return std::max(group_size, local_world_size) > cpus;
}

int cpus_for_host_ranks(int own_cpus, int group_union, int cpuset) {
  if (group_union > own_cpus) return std::max(cpuset, group_union);
  return std::max(own_cpus, group_union);
}

HostRankCpus count_host_rank_cpus(int own_cpus, int group_union, int cpuset, int quota_cpus) {
  HostRankCpus counted;
  counted.cores = cpus_for_host_ranks(own_cpus, group_union, cpuset);
  counted.cpus = within_quota(counted.cores, quota_cpus);
  return counted;
}

HostRankCpus host_rank_cpus(int group_union) { return host_rank_cpus(group_union, cgroup_quota_cpus()); }

HostRankCpus host_rank_cpus(int group_union, int quota_cpus) {
  return count_host_rank_cpus(affinity_cpus(), group_union, cpuset_cpus(), quota_cpus);
}

WaitPhases wait_phases(int group_size, int group_union, int local_world_size, const HostRankCpus& cpus) {
  const bool cores_short = group_union < group_size || oversubscribed(group_size, local_world_size, cpus.cores);
  const bool quota_short = oversubscribed(group_size, local_world_size, cpus.cpus);
  WaitPhases phases;
  phases.spin = !cores_short && !quota_short;
  phases.yield = cores_short || !quota_short;
  return phases;
}

std::string wait_decision_text(int group_size, int group_union, int local_world_size, const HostRankCpus& cpus,
                               const CpuQuota& quota, const WaitPhases& phases, long long spin_us, long long yield_us) {
  const int host_ranks = std::max(group_size, local_world_size);
  std::string text = std::to_string(host_ranks) + " ranks on this host";
  if (host_ranks > group_size) text += " (the launcher's count; the group has " + std::to_string(group_size) + ")";
  text += ", CPUs " + std::to_string(cpus.cpus) + " (cores " + std::to_string(cpus.cores) + ", the ranks' masks together " +
          (group_union > 0 ? std::to_string(group_union) : std::string("unknown")) + ", cgroup CPU quota " +
          quota.describe() + "): waiters ";
  if (spin_us > 0) text += "spin " + std::to_string(spin_us) + " us, then ";
  if (yield_us > 0) text += "yield " + std::to_string(yield_us) + " us, then ";
  text += spin_us > 0 || yield_us > 0 ? "sleep" : "sleep at once";
  // Why: the phases as the CPUs decide them; then a setting that overruled them.
  text += phases.spin ? " (a CPU per rank" : phases.yield ? " (cores short" : " (quota short";
  if (phases.spin && spin_us == 0) text += "; shm_spin_us=0";
  if (phases.yield && yield_us == 0) text += "; shm_yield_us=0";
  if (!phases.yield && yield_us > 0) text += "; shm_yield_us set";
  return text + ")";
}

}  // namespace shm
}  // namespace distcomm
