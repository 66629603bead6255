// When a host counts as oversubscribed (backends/shm/shm_cpus.h): the one rule that both the
// spin policy and group creation's populating follow. It counts the host's ranks (the
// launcher's local world size), not the group's alone, against the CPUs this process may
// run on (its affinity mask, which a container's cpuset narrows), not the host's online
// count: 64 ranks in groups of 2 on 2 cores, or 8 ranks in a 2-CPU container of a 64-core
// host, were each taken for a host with a core per rank. Where the group's ranks are pinned
// apart, the CPUs the host lets the job use (its cpuset, cpuset_cpus()) count, not the host's
// online CPUs: ranks pinned a core each in a container were taken for ranks of the whole host.
// A cgroup CPU quota caps both (a Kubernetes CPU limit: a quota, no cpuset): 8 ranks in a pod
// limited to 4 CPUs of a 64-core node were taken for ranks with 64 cores.
#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "backends/shm/cgroup_cpu_quota.h"
#include "backends/shm/shm_cpus.h"
#include "tests/backends/shm/cpu_quota_cgroup.h"

namespace distcomm {
namespace shm {
namespace {

TEST(ShmCpus, RanksUpToTheCpusFit) {
  EXPECT_FALSE(oversubscribed(2, 0, 2));
  EXPECT_FALSE(oversubscribed(4, 4, 8));
  EXPECT_FALSE(oversubscribed(1, 0, 1));
}

TEST(ShmCpus, AGroupLargerThanTheCpusIsOversubscribed) {
  EXPECT_TRUE(oversubscribed(3, 0, 2));
  EXPECT_TRUE(oversubscribed(96, 0, 2));
}

TEST(ShmCpus, TheHostsRanksCountNotTheGroupsAlone) {
  // 64 ranks on 2 cores, split into 32 groups of 2: each group alone would fit.
  EXPECT_TRUE(oversubscribed(2, 64, 2));
  // The launcher's count unknown (0): the group's own size decides.
  EXPECT_FALSE(oversubscribed(2, 0, 2));
  // A group larger than the launcher says (a world spanning hosts counted per host).
  EXPECT_TRUE(oversubscribed(8, 4, 4));
}

TEST(ShmCpus, UsableCpusAreTheAffinityMasksWithinTheQuota) {
  // A container limited to some CPUs shows them in the mask, not in the online count.
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(::sched_getaffinity(0, sizeof(set), &set), 0);
  EXPECT_EQ(affinity_cpus(), CPU_COUNT(&set));
  EXPECT_EQ(usable_cpus(), within_quota(CPU_COUNT(&set), cgroup_quota_cpus()));
  EXPECT_LE(usable_cpus(), online_cpus());
  EXPECT_GE(usable_cpus(), 1);
}

TEST(ShmCpus, AQuotaCapsTheCount) {
  EXPECT_EQ(within_quota(64, 4), 4);
  EXPECT_EQ(within_quota(2, 8), 2);
  EXPECT_EQ(within_quota(2, 0), 2);  // no quota
  // A pod limited to 4 CPUs of a 64-core node, no cpuset, 8 ranks in groups of 2: they
  // counted 64 and spun.
  EXPECT_TRUE(oversubscribed(2, 8, within_quota(cpus_for_host_ranks(64, 64, 64), 4)));
  // The same ranks pinned apart (a mask of 1 each): the cpuset's 64 are capped too.
  EXPECT_EQ(within_quota(cpus_for_host_ranks(1, 2, 64), 4), 4);
  EXPECT_TRUE(oversubscribed(2, 8, within_quota(cpus_for_host_ranks(1, 2, 64), 4)));
  // 4 ranks fit a quota of 4.
  EXPECT_FALSE(oversubscribed(2, 4, within_quota(cpus_for_host_ranks(64, 64, 64), 4)));
}

TEST(ShmCpus, ANarrowerMaskNarrowsTheCount) {
  // Pinned to one CPU (as taskset or a cpuset would), two ranks no longer fit.
  cpu_set_t saved;
  CPU_ZERO(&saved);
  ASSERT_EQ(::sched_getaffinity(0, sizeof(saved), &saved), 0);
  int first = 0;
  while (!CPU_ISSET(first, &saved)) ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  ASSERT_EQ(::sched_setaffinity(0, sizeof(one), &one), 0);
  const int pinned = usable_cpus();
  ASSERT_EQ(::sched_setaffinity(0, sizeof(saved), &saved), 0);
  EXPECT_EQ(pinned, 1);
  EXPECT_TRUE(oversubscribed(2, 0, pinned));
}

TEST(ShmCpus, RanksPinnedApartCountTheHostsCpus) {
  // 8 ranks pinned one a core on an 8-core host, in groups of 2: each mask holds 1 CPU, the
  // group's union 2. The host is not oversubscribed, so they may spin (ada190d counted 2).
  EXPECT_EQ(cpus_for_host_ranks(/*own=*/1, /*union=*/2, /*cpuset=*/8), 8);
  EXPECT_FALSE(oversubscribed(2, 8, cpus_for_host_ranks(1, 2, 8)));
  // 64 ranks so pinned on 8 cores share them: still oversubscribed.
  EXPECT_TRUE(oversubscribed(2, 64, cpus_for_host_ranks(1, 2, 8)));
  // One mask for all (a container's cpuset of 2 CPUs on a 64-core host): its 2 CPUs count,
  // not the host's 64.
  EXPECT_EQ(cpus_for_host_ranks(2, 2, 64), 2);
  EXPECT_TRUE(oversubscribed(2, 8, cpus_for_host_ranks(2, 2, 64)));
  // Masks unknown (union 0): this process's own.
  EXPECT_EQ(cpus_for_host_ranks(4, 0, 64), 4);
}

TEST(ShmCpus, TheQuotaCapsTheCountNotTheCores) {
  // A pod limited to 4 CPUs of a 64-core node, no cpuset, one mask for all.
  HostRankCpus pod = count_host_rank_cpus(/*own=*/64, /*union=*/64, /*cpuset=*/64, /*quota=*/4);
  EXPECT_EQ(pod.cpus, 4);
  EXPECT_EQ(pod.cores, 64);
  // Ranks pinned apart there: the cpuset counts, then the quota caps it.
  pod = count_host_rank_cpus(1, 2, 64, 4);
  EXPECT_EQ(pod.cpus, 4);
  EXPECT_EQ(pod.cores, 64);
  // No quota (0): both the same.
  const HostRankCpus bare = count_host_rank_cpus(2, 2, 64, 0);
  EXPECT_EQ(bare.cpus, 2);
  EXPECT_EQ(bare.cores, 2);
}

// {cpus within the quota, cores}.
HostRankCpus counted(int cpus, int cores) {
  HostRankCpus c;
  c.cpus = cpus;
  c.cores = cores;
  return c;
}

TEST(ShmCpus, RanksWithACpuEachSpinThenYield) {
  const WaitPhases phases = wait_phases(/*size=*/2, /*union=*/2, /*local_world_size=*/0, counted(2, 2));
  EXPECT_TRUE(phases.spin);
  EXPECT_TRUE(phases.yield);
  // 8 ranks of a 64-core pod whose quota allows 8.
  EXPECT_TRUE(wait_phases(2, 64, 8, counted(8, 64)).spin);
}

TEST(ShmCpus, RanksShortOfCoresYieldWithoutSpinning) {
  // More ranks than cores, no quota: sched_yield hands the core to the awaited rank.
  WaitPhases phases = wait_phases(4, 2, 0, counted(2, 2));
  EXPECT_FALSE(phases.spin);
  EXPECT_TRUE(phases.yield);
  // The host's ranks outnumber its cores, though the group's 2 would fit.
  phases = wait_phases(2, 2, 64, counted(2, 2));
  EXPECT_FALSE(phases.spin);
  EXPECT_TRUE(phases.yield);
  // Ranks pinned to one core together: the union is short, whatever the host has.
  phases = wait_phases(2, 1, 0, counted(64, 64));
  EXPECT_FALSE(phases.spin);
  EXPECT_TRUE(phases.yield);
  // Masks unknown (union 0): as short.
  phases = wait_phases(2, 0, 0, counted(64, 64));
  EXPECT_FALSE(phases.spin);
  EXPECT_TRUE(phases.yield);
  // Short of cores and of quota both: the cores are busy, so yielding still hands them on.
  phases = wait_phases(2, 2, 8, counted(2, 4));
  EXPECT_FALSE(phases.spin);
  EXPECT_TRUE(phases.yield);
}

TEST(ShmCpus, RanksShortOfQuotaAloneNeitherSpinNorYield) {
  // 8 ranks in a pod limited to 4 CPUs of a 64-core node: the cores are free, sched_yield
  // returns at once, and a yield loop would use up the quota as a spin does.
  WaitPhases phases = wait_phases(2, 64, 8, counted(4, 64));
  EXPECT_FALSE(phases.spin);
  EXPECT_FALSE(phases.yield);
  // 2 ranks in a quota of 1 CPU on 2 cores (shm_binding_test's case).
  phases = wait_phases(2, 2, 0, counted(1, 2));
  EXPECT_FALSE(phases.spin);
  EXPECT_FALSE(phases.yield);
}

// shm's INFO line at creation: the decision, why, and what was counted (the quota with its
// numbers and folder).
TEST(ShmCpus, TheDecisionIsSaidWithWhatItCounted) {
  CpuQuota quota;
  quota.cpus = 1;
  quota.quota_us = 50000;
  quota.period_us = 100000;
  quota.folder = "/sys/fs/cgroup/cpu/x";
  EXPECT_EQ(wait_decision_text(2, 2, 0, counted(1, 2), quota, wait_phases(2, 2, 0, counted(1, 2)), 0, 0),
            "2 ranks on this host, CPUs 1 (cores 2, the ranks' masks together 2, cgroup CPU quota 1: 50000/100000 us "
            "at /sys/fs/cgroup/cpu/x): waiters sleep at once (quota short)");
  const CpuQuota none;
  EXPECT_EQ(wait_decision_text(2, 2, 0, counted(8, 8), none, wait_phases(2, 2, 0, counted(8, 8)), 20, 200),
            "2 ranks on this host, CPUs 8 (cores 8, the ranks' masks together 2, cgroup CPU quota none): waiters spin "
            "20 us, then yield 200 us, then sleep (a CPU per rank)");
  // 2 ranks of 4 on a 2-core host (the launcher's count), masks unknown: the cores are short.
  EXPECT_EQ(wait_decision_text(2, 0, 4, counted(2, 2), none, wait_phases(2, 0, 4, counted(2, 2)), 0, 200),
            "4 ranks on this host (the launcher's count; the group has 2), CPUs 2 (cores 2, the ranks' masks together "
            "unknown, cgroup CPU quota none): waiters yield 200 us, then sleep (cores short)");
  // Settings that overrule the phases are named: shm_yield_us set under a quota, shm_spin_us=0.
  EXPECT_EQ(wait_decision_text(2, 2, 0, counted(1, 2), quota, wait_phases(2, 2, 0, counted(1, 2)), 0, 1000),
            "2 ranks on this host, CPUs 1 (cores 2, the ranks' masks together 2, cgroup CPU quota 1: 50000/100000 us "
            "at /sys/fs/cgroup/cpu/x): waiters yield 1000 us, then sleep (quota short; shm_yield_us set)");
  EXPECT_EQ(wait_decision_text(2, 2, 0, counted(8, 8), none, wait_phases(2, 2, 0, counted(8, 8)), 0, 0),
            "2 ranks on this host, CPUs 8 (cores 8, the ranks' masks together 2, cgroup CPU quota none): waiters sleep "
            "at once (a CPU per rank; shm_spin_us=0; shm_yield_us=0)");
}

// The first CPU of the calling thread's mask.
int first_allowed_cpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return 0;
  int cpu = 0;
  while (cpu < CPU_SETSIZE - 1 && !CPU_ISSET(cpu, &set)) ++cpu;
  return cpu;
}

bool pin_to(int cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  return ::sched_setaffinity(0, sizeof(one), &one) == 0;
}

TEST(ShmCpus, ThisProcesssOwnPinDoesNotNarrowTheCpuset) {
  // A rank pinned to one core (as a launcher, taskset or the program pins it) is still in a
  // cpuset of every CPU it started with: the spin rule's count for ranks pinned apart.
  cpu_set_t saved;
  CPU_ZERO(&saved);
  ASSERT_EQ(::sched_getaffinity(0, sizeof(saved), &saved), 0);
  ASSERT_TRUE(pin_to(first_allowed_cpu()));
  const int own = usable_cpus();
  const int cpuset = cpuset_cpus();
  const int for_two_apart = host_rank_cpus(2).cpus;
  cpu_set_t after;
  CPU_ZERO(&after);
  ASSERT_EQ(::sched_getaffinity(0, sizeof(after), &after), 0);
  ASSERT_EQ(::sched_setaffinity(0, sizeof(saved), &saved), 0);
  EXPECT_EQ(own, 1);
  EXPECT_EQ(CPU_COUNT(&after), 1) << "the probe changed the calling thread's mask";
  EXPECT_GE(cpuset, CPU_COUNT(&saved));
  EXPECT_LE(cpuset, online_cpus());
  EXPECT_EQ(for_two_apart, within_quota(std::max(cpuset, 2), cgroup_quota_cpus()));
}

// "0-2,5" -> {0, 1, 2, 5}.
std::vector<int> parse_cpu_list(const std::string& text) {
  std::vector<int> cpus;
  std::istringstream in(text);
  for (std::string part; std::getline(in, part, ',');) {
    if (part.empty()) continue;
    const size_t dash = part.find('-');
    const int lo = std::stoi(part.substr(0, dash));
    const int hi = dash == std::string::npos ? lo : std::stoi(part.substr(dash + 1));
    for (int c = lo; c <= hi; ++c) cpus.push_back(c);
  }
  return cpus;
}

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

bool write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.flush();
  return static_cast<bool>(out);
}

// Where this process's cgroup v1 cpuset is mounted and which of it holds this process
// ("" when there is no writable cgroup v1 cpuset: cgroup v2 only, no root, a read-only /sys).
std::string own_cpuset_folder() {
  const std::string mount = "/sys/fs/cgroup/cpuset";
  std::ifstream in("/proc/self/cgroup");
  for (std::string line; std::getline(in, line);) {
    const size_t a = line.find(':');
    const size_t b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::istringstream controllers(line.substr(a + 1, b - a - 1));
    for (std::string c; std::getline(controllers, c, ',');) {
      if (c != "cpuset") continue;
      const std::string folder = mount + line.substr(b + 1);
      return ::access((folder + "/cgroup.procs").c_str(), W_OK) == 0 ? folder : "";
    }
  }
  return "";
}

// A real container's cpuset: a child process moves itself into a cgroup of fewer CPUs than
// the host has online, pins itself to one of them (ranks pinned apart), and reports what
// the spin rule counts there. Before, it counted the host's online CPUs.
TEST(ShmCpus, RanksPinnedApartInACpusetCountItsCpusNotTheHosts) {
  const std::string parent = own_cpuset_folder();
  if (parent.empty()) GTEST_SKIP() << "no writable cgroup v1 cpuset here (needs root and /sys/fs/cgroup/cpuset)";
  std::vector<int> cpus = parse_cpu_list(read_line(parent + "/cpuset.effective_cpus"));
  if (cpus.empty()) cpus = parse_cpu_list(read_line(parent + "/cpuset.cpus"));
  if (cpus.size() < 2 || static_cast<int>(cpus.size()) > online_cpus()) {
    GTEST_SKIP() << "this cpuset has " << cpus.size() << " CPUs: none to leave out";
  }
  // Half the CPUs (at least 1): 2 of 4 shows ranks pinned apart within the set; 1 of 2, on
  // a 2-core machine, the set's own count.
  const size_t k = cpus.size() / 2;
  std::string list;
  for (size_t i = 0; i < k; ++i) list += (i ? "," : "") + std::to_string(cpus[i]);
  const std::string folder = parent + "/distcomm_shm_cpus_test_" + std::to_string(::getpid());
  ASSERT_EQ(::mkdir(folder.c_str(), 0755), 0) << folder << ": " << std::strerror(errno);
  struct RemoveAfter {
    std::string path;
    ~RemoveAfter() {
      // The child has ended, but the kernel may take a moment to let its cgroup go.
      for (int i = 0; i < 100 && ::rmdir(path.c_str()) != 0 && errno == EBUSY; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  } remove_after{folder};
  ASSERT_TRUE(write_text(folder + "/cpuset.cpus", list)) << list;
  ASSERT_TRUE(write_text(folder + "/cpuset.mems", read_line(parent + "/cpuset.mems")));

  int result[2];
  ASSERT_EQ(::pipe(result), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(result[0]);
    int report[3] = {-1, -1, -1};
    if (write_text(folder + "/cgroup.procs", std::to_string(::getpid()))) {
      report[0] = cpuset_cpus();
      if (pin_to(first_allowed_cpu())) {
        report[1] = usable_cpus();
        // The group's 2 ranks pinned to 2 CPUs of the set: the cores the cpuset gives, which
        // this case is about (.cpus is that within this process's cgroup CPU quota: a CI
        // runner's limit of 1 CPU made it 1).
        report[2] = host_rank_cpus(2).cores;
      }
    }
    (void)!::write(result[1], report, sizeof(report));
    ::_exit(0);
  }
  ::close(result[1]);
  int report[3] = {-1, -1, -1};
  const ssize_t got = ::read(result[0], report, sizeof(report));
  ::close(result[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_EQ(got, static_cast<ssize_t>(sizeof(report)));
  ASSERT_NE(report[0], -1) << "the child could not join " << folder;
  EXPECT_EQ(report[0], static_cast<int>(k)) << "cpuset " << list << ", host online " << online_cpus();
  EXPECT_EQ(report[1], 1);
  EXPECT_EQ(report[2], std::max(static_cast<int>(k), 2)) << "cpuset " << list;
  // With 4 CPUs or more in the set: the group's ranks pinned apart within a cpuset of k CPUs,
  // and a host running k + 1 ranks of the job is oversubscribed (it was not: online counted).
  if (k >= 2 && static_cast<int>(k) < online_cpus()) {
    EXPECT_TRUE(oversubscribed(2, static_cast<int>(k) + 1, report[2]));
  }
}

// What a child process counts (in `cgroup` where not null): usable_cpus(), host_rank_cpus(2).cpus
// for a group of 2 that share this mask, the same once pinned to one CPU (ranks pinned
// apart), and cgroup_quota_cpus(); -1 each where the child could not join.
std::vector<int> counts_in_child(const testing::CpuQuotaCgroup* cgroup) {
  int result[2];
  if (::pipe(result) != 0) return {};
  const pid_t child = ::fork();
  if (child < 0) return {};
  if (child == 0) {
    ::close(result[0]);
    int report[4] = {-1, -1, -1, -1};
    if (cgroup == nullptr || cgroup->join()) {
      report[0] = usable_cpus();
      report[1] = host_rank_cpus(2).cpus;
      report[3] = cgroup_quota_cpus();
      if (pin_to(first_allowed_cpu())) report[2] = host_rank_cpus(2).cpus;
    }
    (void)!::write(result[1], report, sizeof(report));
    ::_exit(0);
  }
  ::close(result[1]);
  int report[4] = {-1, -1, -1, -1};
  const ssize_t got = ::read(result[0], report, sizeof(report));
  ::close(result[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (got != static_cast<ssize_t>(sizeof(report))) return {};
  return std::vector<int>(report, report + 4);
}

// A real CPU quota: 50 ms a 100 ms period, half a CPU, counts 1 (as Go, the JVM and .NET
// count it), where outside it this process counts its mask (2 on a 2-core machine). Before,
// the quota was not seen: 2 inside too, and 2 ranks there spun.
TEST(ShmCpus, ACpuQuotaOfHalfACpuCountsOne) {
  std::string why_not;
  const std::unique_ptr<testing::CpuQuotaCgroup> cgroup =
      testing::CpuQuotaCgroup::make("distcomm_shm_cpus_test_quota", 50000, 100000, &why_not);
  if (!cgroup) GTEST_SKIP() << why_not;
  const std::vector<int> outside = counts_in_child(nullptr);
  const std::vector<int> inside = counts_in_child(cgroup.get());
  ASSERT_EQ(outside.size(), 4u) << "no child outside the cgroup";
  ASSERT_EQ(inside.size(), 4u) << "no child in " << cgroup->folder();
  ASSERT_NE(inside[0], -1) << "the child could not join " << cgroup->folder();
  std::fprintf(stderr, "outside: usable %d, group of 2 %d, pinned apart %d, quota %d; in %s: %d, %d, %d, %d\n",
               outside[0], outside[1], outside[2], outside[3], cgroup->folder().c_str(), inside[0], inside[1], inside[2],
               inside[3]);
  if (outside[0] < 2) GTEST_SKIP() << "this process may use " << outside[0] << " CPU: a quota of 1 lowers nothing";
  EXPECT_EQ(outside[0], affinity_cpus()) << "a quota outside the test's cgroup";
  EXPECT_EQ(inside[3], 1);
  EXPECT_EQ(inside[0], 1) << "usable_cpus() in a quota of half a CPU";
  EXPECT_EQ(inside[1], 1) << "the spin policy's count in a quota of half a CPU";
  EXPECT_EQ(inside[2], 1) << "the spin policy's count for ranks pinned apart in a quota of half a CPU";
  EXPECT_TRUE(oversubscribed(2, 0, inside[1]));
  EXPECT_FALSE(oversubscribed(2, 0, outside[1]));
}

}  // namespace
}  // namespace shm
}  // namespace distcomm
