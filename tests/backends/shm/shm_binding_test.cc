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
// masks hold. Nor yield, by default: the cores are free there, so sched_yield returns at once
// and the yield phase (shm_yield_us, 200) uses the quota as a spin would. Seen through the
// waiting thread's CPU time over 200 waits of about 1 ms, against the same waits with
// shm_yield_us=0; a shm_yield_us set on purpose still holds.
//
// At DISTCOMM_DEBUG=INFO each rank says, once per group creation, what it decided and from
// what (the CPUs, the quota and the folder it came from): nothing said it before.
#include <sched.h>
#include <sys/resource.h>
#include <time.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "backends/shm/cgroup_cpu_quota.h"
#include "tests/backends/shm/cpu_quota_cgroup.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace {

using std::chrono::microseconds;
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

// The CPU time the calling thread has used.
microseconds thread_cpu_time() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return microseconds(static_cast<long long>(t.tv_sec) * 1000000 + t.tv_nsec / 1000);
}

// Rank r is pinned to cpu_of_rank[r] (where given) and joins `quota` (where not null) before
// the group is made; rank 1 then waits 500 ms in a barrier for rank 0, and its voluntary
// context switches in that wait say whether it stayed on the CPU (expect_busy: spun, or
// yielded) or slept. `config`: the shm settings, by default a spin long enough (1 s) to show
// in the whole wait, and no yield.
void wait_pinned(const std::vector<int>& cpu_of_rank, bool expect_busy,
                 const testing::CpuQuotaCgroup* quota = nullptr,
                 const std::map<std::string, std::string>& config = {{"shm_spin_us", "1000000"},
                                                                     {"shm_yield_us", "0"}}) {
  GroupHarnessOptions options;
  options.backend_config = config;
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
    std::string settings;
    for (const auto& [key, value] : config) settings += " " + key + "=" + value;
    std::fprintf(stderr, "[%s%s,%s] %ld voluntary context switches in a 500 ms wait\n", where.c_str(),
                 quota != nullptr ? ", in a 1-CPU quota" : "", settings.c_str(), switches);
    if (expect_busy) {
      EXPECT_LE(switches, 2) << "rank 1 slept while it waited (" << where << "," << settings
                             << "): it should have spun or yielded all along";
    } else {
      EXPECT_GE(switches, 5) << "rank 1 did not sleep while it waited: sharing one core, it must not spin";
    }
  }, options);
}

// Why a case that expects spinning cannot see it here: this process's own cgroup CPU quota
// (a CI runner with a Kubernetes CPU limit of 1) allows fewer than 2 CPUs, and there 2 ranks
// rightly do not spin. "" where it allows 2 or more, or there is none.
std::string quota_below_two_cpus() {
  const shm::CpuQuota quota = shm::cgroup_cpu_quota();
  if (quota.cpus == 0 || quota.cpus >= 2) return "";
  return "this process's cgroup CPU quota allows fewer than 2 CPUs (" + quota.describe() +
         "): 2 ranks there do not spin";
}

TEST(ShmBinding, RanksPinnedToACoreEachSpin) {
  const std::vector<int> cpus = two_cpus();
  if (cpus.empty()) GTEST_SKIP() << "this process may run on fewer than 2 CPUs";
  const std::string quota_short = quota_below_two_cpus();
  if (!quota_short.empty()) GTEST_SKIP() << quota_short;
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

// In `quota`, with the shm settings `config`: rank 1 waits kShortWaits times for rank 0,
// about 1 ms each (rank 0 sleeps 1 ms before each barrier). The CPU time rank 1's waiting
// thread used in them, in us (-1 where it could not be read back).
constexpr int kShortWaits = 200;
long long cpu_in_short_waits(const testing::CpuQuotaCgroup& quota, const std::map<std::string, std::string>& config) {
  const std::string dir = testing::make_temp_dir();
  const std::string file = dir + "/rank1_cpu_us";
  GroupHarnessOptions options;
  options.backend_config = config;
  run_group(2, "shm", [&](ProcessGroup& world) {
    ASSERT_TRUE(quota.join()) << quota.folder();
    ProcessGroupPtr pg = world.new_group({0, 1});
    pg->barrier()->wait();
    if (pg->rank() == 0) {
      for (int i = 0; i < kShortWaits; ++i) {
        std::this_thread::sleep_for(milliseconds(1));  // the wait rank 1 is measured in
        pg->barrier()->wait();
      }
      return;
    }
    const microseconds before = thread_cpu_time();
    for (int i = 0; i < kShortWaits; ++i) pg->barrier()->wait();
    const microseconds used = thread_cpu_time() - before;
    std::FILE* out = std::fopen(file.c_str(), "w");
    ASSERT_NE(out, nullptr) << file;
    std::fprintf(out, "%lld\n", static_cast<long long>(used.count()));
    std::fclose(out);
  }, options);
  long long used = -1;
  if (std::FILE* in = std::fopen(file.c_str(), "r")) {
    if (std::fscanf(in, "%lld", &used) != 1) used = -1;
    std::fclose(in);
  }
  testing::remove_temp_dir(dir);
  return used;
}

// The same quota, the default settings (shm_yield_us unset), against shm_yield_us=0 (no
// yield phase: a futex sleep at once) for the same waits. A yield phase runs the first
// 200 us of each ~1 ms wait on the CPU (sched_yield returns at once: the second core is free):
// kShortWaits x ~200 us more. Before, it yielded (no spin under the quota, but the yield phase
// kept): ~45 ms more for 200 waits, where now the two differ by noise.
TEST(ShmBinding, RanksInAOneCpuQuotaDoNotYieldLoopByDefault) {
  if (two_cpus().empty()) GTEST_SKIP() << "this process may run on fewer than 2 CPUs";
  std::string why_not;
  const std::unique_ptr<testing::CpuQuotaCgroup> quota =
      testing::CpuQuotaCgroup::make("distcomm_shm_binding_test_quota", 100000, 100000, &why_not);
  if (!quota) GTEST_SKIP() << why_not;
  const long long no_yield = cpu_in_short_waits(*quota, {{"shm_yield_us", "0"}});
  const long long by_default = cpu_in_short_waits(*quota, {});
  ASSERT_GE(no_yield, 0) << "rank 1's CPU time (shm_yield_us=0) did not come back";
  ASSERT_GE(by_default, 0) << "rank 1's CPU time (default settings) did not come back";
  std::fprintf(stderr, "[in a 1-CPU quota] rank 1's CPU in %d waits of ~1 ms: %lld us with shm_yield_us=0, "
               "%lld us by default\n", kShortWaits, no_yield, by_default);
  // Half a yield phase a wait (a waiter that yielded used ~150-180 us more a wait here).
  const long long most_more = kShortWaits * 100;
  EXPECT_LT(by_default - no_yield, most_more)
      << "rank 1 used " << by_default << " us of CPU in " << kShortWaits << " waits of about 1 ms by default, "
      << no_yield << " us with shm_yield_us=0, in a 1-CPU quota on free cores: it yield-looped";
}

// shm_yield_us set on purpose holds under the quota: rank 1 yields through the whole 500 ms
// wait (1 s of yield), as it was told, and so never sleeps.
TEST(ShmBinding, AYieldSetOnPurposeHoldsInACpuQuota) {
  if (two_cpus().empty()) GTEST_SKIP() << "this process may run on fewer than 2 CPUs";
  std::string why_not;
  const std::unique_ptr<testing::CpuQuotaCgroup> quota =
      testing::CpuQuotaCgroup::make("distcomm_shm_binding_test_quota", 100000, 100000, &why_not);
  if (!quota) GTEST_SKIP() << why_not;
  wait_pinned({}, true, quota.get(), {{"shm_yield_us", "1000000"}});
}

// The "shm group" lines each rank of a new group of the world's 2 ranks wrote to stderr while
// the group was made, at `debug`: rank r pinned to cpu_of_rank[r] where given, in `quota`
// where not null. lines[r]: rank r's (one line saying so where its did not come back).
std::vector<std::vector<std::string>> decision_lines(const std::vector<int>& cpu_of_rank, DebugLevel debug,
                                                     const testing::CpuQuotaCgroup* quota = nullptr) {
  const std::string dir = testing::make_temp_dir();
  GroupHarnessOptions options;
  options.debug = debug;
  run_group(2, "shm", [&](ProcessGroup& world) {
    if (!cpu_of_rank.empty()) pin_to(cpu_of_rank[static_cast<size_t>(world.rank())]);
    if (quota != nullptr) {
      ASSERT_TRUE(quota->join()) << quota->folder();
    }
    ::testing::internal::CaptureStderr();
    ProcessGroupPtr pg = world.new_group({0, 1});
    const std::string said = ::testing::internal::GetCapturedStderr();
    std::ofstream out(dir + "/rank" + std::to_string(world.rank()));
    std::istringstream lines(said);
    for (std::string line; std::getline(lines, line);) {
      if (line.find("shm group '" + pg->name() + "'") != std::string::npos) out << line << "\n";
    }
    out << "end\n";  // the file is whole
  }, options);
  std::vector<std::vector<std::string>> lines(2);
  for (int r = 0; r < 2; ++r) {
    std::ifstream in(dir + "/rank" + std::to_string(r));
    std::vector<std::string> got;
    for (std::string line; std::getline(in, line);) got.push_back(line);
    if (!got.empty() && got.back() == "end") {
      got.pop_back();
      lines[static_cast<size_t>(r)] = got;
    } else {
      lines[static_cast<size_t>(r)] = {"(rank " + std::to_string(r) + "'s lines did not come back)"};
    }
  }
  testing::remove_temp_dir(dir);
  return lines;
}

// Each rank said one line of the creation, naming itself, the decision (`decision`: "waiters
// spin 20 us, then yield 200 us, then sleep (a CPU per rank)") and what it counted (`from`).
void expect_one_line_saying(const std::vector<std::vector<std::string>>& lines, const std::string& decision,
                            const std::string& from) {
  for (int r = 0; r < 2; ++r) {
    const std::vector<std::string>& mine = lines[static_cast<size_t>(r)];
    ASSERT_EQ(mine.size(), 1u) << "rank " << r << " said, of the group's creation: "
                               << (mine.empty() ? "nothing" : mine[0] + (mine.size() > 1 ? " ..." : ""));
    EXPECT_NE(mine[0].find("rank " + std::to_string(r) + " of 2: 2 ranks on this host, "), std::string::npos) << mine[0];
    EXPECT_NE(mine[0].find(decision), std::string::npos) << mine[0];
    EXPECT_NE(mine[0].find(from), std::string::npos) << mine[0];
  }
}

// Pinned a core each: they spin, then yield, then sleep; under a quota of this process's
// own of 1 CPU they sleep at once, and the line says why.
TEST(ShmBinding, AtInfoEachRankSaysOnceThatItSpinsAndWhy) {
  const std::vector<int> cpus = two_cpus();
  if (cpus.empty()) GTEST_SKIP() << "this process may run on fewer than 2 CPUs";
  const shm::CpuQuota own = shm::cgroup_cpu_quota();
  const std::vector<std::vector<std::string>> lines = decision_lines(cpus, DebugLevel::kInfo);
  const std::string from = "cgroup CPU quota " + own.describe();
  if (own.cpus == 1) {
    expect_one_line_saying(lines, "waiters sleep at once (quota short)", from);
  } else {
    expect_one_line_saying(lines, "waiters spin 20 us, then yield 200 us, then sleep (a CPU per rank)", from);
  }
}

// Pinned to one core together: the cores are short, so they yield, then sleep.
TEST(ShmBinding, AtInfoRanksSharingACoreSayTheyYield) {
  const std::vector<int> cpus = two_cpus();
  if (cpus.empty()) GTEST_SKIP() << "this process may run on fewer than 2 CPUs";
  expect_one_line_saying(decision_lines({cpus[0], cpus[0]}, DebugLevel::kInfo),
                         "waiters yield 200 us, then sleep (cores short)", "the ranks' masks together 1,");
}

// In a real 1-CPU quota: they sleep at once, and the line names the quota and its folder.
TEST(ShmBinding, AtInfoRanksInAOneCpuQuotaSayTheySleepAtOnceAndWhere) {
  if (two_cpus().empty()) GTEST_SKIP() << "this process may run on fewer than 2 CPUs";
  std::string why_not;
  const std::unique_ptr<testing::CpuQuotaCgroup> quota =
      testing::CpuQuotaCgroup::make("distcomm_shm_binding_test_quota", 100000, 100000, &why_not);
  if (!quota) GTEST_SKIP() << why_not;
  // A quota of this process's own below 1 CPU (a parent's) would be the one named.
  const shm::CpuQuota own = shm::cgroup_cpu_quota();
  const bool own_tighter = own.cpus != 0 && own.quota_us < own.period_us;
  expect_one_line_saying(decision_lines({}, DebugLevel::kInfo, quota.get()), "waiters sleep at once (quota short)",
                         own_tighter ? "cgroup CPU quota 1: " : "cgroup CPU quota 1: 100000/100000 us at " + quota->folder());
}

// At the default level (OFF) nothing is said.
TEST(ShmBinding, AtOffNothingIsSaid) {
  const std::vector<std::vector<std::string>> lines = decision_lines({}, DebugLevel::kOff);
  EXPECT_EQ(lines, std::vector<std::vector<std::string>>(2)) << "a rank said something at DISTCOMM_DEBUG=OFF";
}

}  // namespace
}  // namespace distcomm
