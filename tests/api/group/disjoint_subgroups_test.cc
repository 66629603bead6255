// One new_group call where the ranks pass disjoint lists makes several groups of one name
// ("world/g0", docs/subgroups.md). Their own subgroups (split, split_group, a DeviceMesh, and
// hier's levels within and across hosts) must stay theirs: named after the group's creation
// ("world/g0@2/s0c0" for the second), never sharing keys with the other group's. Found by a
// review: 4 disjoint pairs making 150 splits got a group of world ranks 3 and 4 in 2 runs of
// 5, whose all_reduce returned wrong sums without an error; other runs said "rank 1 was
// started twice"; and hier's levels of the two groups collided on every run.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "api/process_group.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace {

// Sum of (1 + world rank) over `group`'s members, checked against what the members are.
void expect_group_of(ProcessGroup& world, ProcessGroup& group, const std::vector<int>& world_members) {
  Tensor t = Tensor::of<float>({1.0f + world.rank()});
  group.all_reduce(t)->wait();
  float want = 0;
  for (int r : world_members) want += 1.0f + r;
  EXPECT_EQ(t.item(0), want) << "rank " << world.rank() << " in " << group.name();
  EXPECT_EQ(group.global_ranks(), world_members) << group.name();
}

void disjoint_pairs_then_splits(const std::string& backend) {
  testing::run_group(4, backend, [](ProcessGroup& world) {
    const std::vector<int> pair = world.rank() % 2 == 0 ? std::vector<int>{0, 2} : std::vector<int>{1, 3};
    auto g = world.new_group(pair);
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(g->name(), "world/g0");  // both pairs' groups: one name
    expect_group_of(world, *g, pair);
    std::set<std::string> names_seen;
    for (int i = 0; i < 20; ++i) {
      auto s = g->split(0, g->rank());
      ASSERT_NE(s, nullptr);
      expect_group_of(world, *s, pair);
      // The other pair's split of the same number has another name.
      const std::vector<std::string> names = world.exchange().all_gather(s->name());
      EXPECT_NE(names[0], names[1]) << "the two pairs' splits share the name " << names[0];
      EXPECT_EQ(names[0], names[2]);
    }
    auto halves = g->split_group({{0}, {1}});
    ASSERT_NE(halves, nullptr);
    expect_group_of(world, *halves, {world.rank()});
  });
}

TEST(DisjointSubgroups, SplitsOfTheGroupsOfOneNewGroupCallStayApartOnGloo) { disjoint_pairs_then_splits("gloo"); }

TEST(DisjointSubgroups, SplitsOfTheGroupsOfOneNewGroupCallStayApartOnShm) { disjoint_pairs_then_splits("shm"); }

// hier over 2 simulated hosts of 4 ranks, lists {0, 1, 4, 5} and {2, 3, 6, 7}: each group
// has 2 ranks on each host, so it builds levels within and across hosts, and each group's
// levels are its own.
TEST(DisjointSubgroups, HierLevelsOfTheGroupsOfOneNewGroupCallStayApart) {
  testing::GroupHarnessOptions options;
  options.host_ids = {"hostA", "hostA", "hostA", "hostA", "hostB", "hostB", "hostB", "hostB"};
  testing::run_group(
      8, "hier",
      [](ProcessGroup& world) {
        const std::vector<int> mine =
            world.rank() % 4 < 2 ? std::vector<int>{0, 1, 4, 5} : std::vector<int>{2, 3, 6, 7};
        auto g = world.new_group(mine);
        ASSERT_NE(g, nullptr);
        EXPECT_NE(g->backend_name().find("2 hosts x 2 ranks"), std::string::npos) << g->backend_name();
        expect_group_of(world, *g, mine);
      },
      options);
}

}  // namespace
}  // namespace distcomm
