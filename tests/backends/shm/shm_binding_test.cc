// Whether a waiting shm rank spins, under CPU binding. Spinning pays while every rank has a
// core of its own: ranks pinned one to a core each must spin (each one's own mask holds a
// single CPU, which once turned spinning off), ranks pinned to one core together must not.
//
// Seen from outside through the waiting thread's voluntary context switches: a rank that
// spins through a 500 ms wait makes none; one that sleeps on the futex wakes at least every
// 10 ms (its liveness checks), so it makes dozens (5 are asked: a loaded machine delays
// wake-ups, and rank 1 may enter the wait late). Spin is set long (1 s) and yield to 0, so
// the answer shows in the whole wait.
//
// A cgroup CPU quota counts too (a Kubernetes CPU limit: a quota and no cpuset, every mask
// the whole node's): ranks whose cgroup may use 1 CPU must not spin, however many their
// masks hold.
#include <sched.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/backends/shm/cpu_quota_cgroup.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace {

using std::chrono::milliseconds;
using testing::GroupHarnessOptions;
using testing::run_group;

// The first two CPUs this process may run on; empty when it may run on fewer.
std::vector<int> two_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus.size() == 2 ? cpus : std::vector<int>();
}

void pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  ASSERT_EQ(::sched_setaffinity(0, sizeof(set), &set), 0);
}

long voluntary_switches() {
  struct rusage u {};
  ::getrusage(RUSAGE_THREAD, &u);
  return u.ru_nvcsw;
}

// Rank r is pinned to cpu_of_rank[r] (where given) and joins `quota` (where not null) before
// the group is made; rank 1 then waits 500 ms in a barrier for rank 0, and its voluntary
// context switches in that wait say whether it spun.
void wait_pinned(const std::vector<int>& cpu_of_rank, bool expect_spin,
                 const testing::CpuQuotaCgroup* quota = nullptr) {
  GroupHarnessOptions options;
  options.backend_config = {{"shm_spin_us", "1000000"}, {"shm_yield_us", "0"}};
  run_group(2, "shm", [&](ProcessGroup& world) {
    if (!cpu_of_rank.empty()) pin_to(cpu_of_rank[static_cast<size_t>(world.rank())]);
    if (quota != nullptr) {
      ASSERT_TRUE(quota->join()) << quota->folder();
    }
    ProcessGroupPtr pg = world.new_group({0, 1});  // sees the ranks' masks as they are now
    pg->barrier()->wait();
    if (pg->rank() == 0) {
      std::this_thread::sleep_for(milliseconds(500));  // the wait rank 1 is measured in
      pg->barrier()->wait();
      return;
    }
    const long before = voluntary_switches();
    pg->barrier()->wait();
    const long switches = voluntary_switches() - before;
    const std::string where = cpu_of_rank.empty() ? "not pinned"
                                                  : "rank 1 pinned to CPU " + std::to_string(cpu_of_rank[1]) +
                                                        ", rank 0 to CPU " + std::to_string(cpu_of_rank[0]);
    std::fprintf(stderr, "[%s%s] %ld voluntary context switches in a 500 ms wait\n", where.c_str(),
                 quota != nullptr ? ", in a 1-CPU quota" : "", switches);
    if (expect_spin) {
      EXPECT_LE(switches, 2) << "rank 1 slept while it waited: pinned to a core of its own, it should spin";
    } else {
      EXPECT_GE(switches, 5) << "rank 1 did not sleep while it waited: sharing one core, it must not spin";
    }
  }, options);
}

TEST(ShmBinding, RanksPinnedToACoreEachSpin) {
  const std::vector<int> cpus = two_cpus();
  if (cpus.empty()) GTEST_SKIP() << "this process may run on fewer than 2 CPUs";
  wait_pinned(cpus, true);
}

TEST(ShmBinding, RanksPinnedToOneCoreTogetherDoNotSpin) {
  const std::vector<int> cpus = two_cpus();
  if (cpus.empty()) GTEST_SKIP() << "this process may run on fewer than 2 CPUs";
  wait_pinned({cpus[0], cpus[0]}, false);
}

// Not pinned, masks of 2 CPUs or more, but a cgroup quota of 1 CPU (100 ms a 100 ms
// period): the two ranks share one CPU's time, so rank 1 must not spin. Before the quota was
// counted, it spun (and used up the quota rank 0 needed).
TEST(ShmBinding, RanksInAOneCpuQuotaDoNotSpin) {
  if (two_cpus().empty()) GTEST_SKIP() << "this process may run on fewer than 2 CPUs";
  std::string why_not;
  const std::unique_ptr<testing::CpuQuotaCgroup> quota =
      testing::CpuQuotaCgroup::make("distcomm_shm_binding_test_quota", 100000, 100000, &why_not);
  if (!quota) GTEST_SKIP() << why_not;
  wait_pinned({}, false, quota.get());
}

}  // namespace
}  // namespace distcomm
