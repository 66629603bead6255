// When a host counts as oversubscribed (backends/shm/shm_cpus.h): the one rule that both the
// spin policy and group creation's populating follow. It counts the host's ranks (the
// launcher's local world size), not the group's alone, against the CPUs this process may
// run on (its affinity mask, which a container's cpuset narrows), not the host's online
// count: 64 ranks in groups of 2 on 2 cores, or 8 ranks in a 2-CPU container of a 64-core
// host, were each taken for a host with a core per rank.
#include <sched.h>

#include <gtest/gtest.h>

#include "backends/shm/shm_cpus.h"

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

TEST(ShmCpus, UsableCpusAreTheAffinityMasks) {
  // A container limited to some CPUs shows them in the mask, not in the online count.
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(::sched_getaffinity(0, sizeof(set), &set), 0);
  EXPECT_EQ(usable_cpus(), CPU_COUNT(&set));
  EXPECT_LE(usable_cpus(), online_cpus());
  EXPECT_GE(usable_cpus(), 1);
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
  EXPECT_EQ(cpus_for_host_ranks(/*own=*/1, /*union=*/2, /*online=*/8), 8);
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

}  // namespace
}  // namespace shm
}  // namespace distcomm
