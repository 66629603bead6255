// DeviceMesh and split_group over the in_process test plugin (N ProcessGroups in one
// process): the layout logic (coordinates, groups per dimension, slices, flatten) at 2x2,
// 2x3 and 3-D, and the arguments checked on every rank together, so that one rank's bad or
// different call fails every rank at once, naming it, instead of leaving them waiting.
// The same conformance check runs over gloo, shm, auto and mpi in their suites.
#include <gtest/gtest.h>

#include "api/device_mesh.h"
#include "api/errors.h"
#include "tests/backends/conformance/conformance.h"
#include "tests/testing/in_process_group.h"

namespace distcomm {
namespace {

using testing::in_process_world;
using testing::on_every_rank;

// What fn throws as InvalidArgument ("nothing" when it returns).
template <typename Fn>
std::string invalid_argument(Fn fn) {
  try {
    fn();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "nothing";
}

void expect_contains(const std::string& text, const std::string& part, int rank) {
  EXPECT_NE(text.find(part), std::string::npos) << "rank " << rank << ": '" << text << "' lacks '" << part << "'";
}

TEST(DeviceMesh, TwoByTwoAndTwoByThree) {
  on_every_rank(in_process_world(4), [](ProcessGroup& pg) { conformance::check_device_mesh(pg, {2, 2}); });
  on_every_rank(in_process_world(6), [](ProcessGroup& pg) { conformance::check_device_mesh(pg, {2, 3}); });
}

TEST(DeviceMesh, ThreeDimensionsSliceAndFlatten) {
  on_every_rank(in_process_world(12), [](ProcessGroup& pg) {
    const int me = pg.rank();
    DeviceMesh mesh(pg.shared_from_this(), {2, 3, 2}, {"pp", "dp", "tp"});
    const std::vector<int> coord{me / 6, me / 2 % 3, me % 2};
    EXPECT_EQ(mesh.coordinate(), coord) << "rank " << me;
    EXPECT_EQ(mesh.group("dp")->size(), 3);
    EXPECT_EQ(mesh.group("dp")->rank(), coord[1]);
    // The (dp, tp) slice through my pp stage: six ranks, flattened into one group.
    DeviceMesh stage = mesh.slice({"dp", "tp"});
    EXPECT_EQ(stage.shape(), (std::vector<int>{3, 2}));
    std::vector<int> stage_ranks;
    for (int r = 0; r < 6; ++r) stage_ranks.push_back(me / 6 * 6 + r);
    EXPECT_EQ(stage.ranks(), stage_ranks) << "rank " << me;
    DeviceMesh flat = stage.flatten("dp_tp");
    EXPECT_EQ(flat.size(), 6);
    EXPECT_EQ(flat.group("dp_tp")->rank(), me % 6);
    Tensor t = Tensor::of<int64_t>({me});
    flat.group("dp_tp")->all_reduce(t)->wait();
    EXPECT_EQ(t.item(0), me / 6 * 36 + 15) << "rank " << me << ": sum over my stage";
    // (pp, tp): ranks that share my dp index, row-major over (pp, tp).
    std::vector<int> pp_tp;
    for (int p = 0; p < 2; ++p) {
      for (int t2 = 0; t2 < 2; ++t2) pp_tp.push_back(p * 6 + coord[1] * 2 + t2);
    }
    EXPECT_EQ(mesh.slice({"pp", "tp"}).ranks(), pp_tp) << "rank " << me;
    // A one-dimension mesh flattens to the group it has.
    EXPECT_EQ(mesh["tp"].flatten("tp_again").group("tp_again"), mesh.group("tp"));
    EXPECT_EQ(mesh.slice({"pp", "dp_tp"}).size(), 12);
    expect_contains(invalid_argument([&] { mesh.slice({"dp", "dp_tp"}); }), "covers dimension 'dp' twice", me);
  });
}

// A mesh over a subgroup names world ranks, as PyTorch's: over new_group({2, 3, 4, 5}) of 6
// ranks, its ranks are [2, 3, 4, 5] (found by a review: they were [0, 1, 2, 3], the
// subgroup's, although its group's global_ranks() said [2, 3]).
TEST(DeviceMesh, RanksOfAMeshOverASubgroupAreWorldRanks) {
  on_every_rank(in_process_world(6), [](ProcessGroup& pg) {
    ProcessGroupPtr sub = pg.new_group({2, 3, 4, 5});
    if (!sub) return;
    DeviceMesh mesh(sub, {2, 2}, {"dp", "tp"});
    EXPECT_EQ(mesh.ranks(), (std::vector<int>{2, 3, 4, 5}));
    const std::vector<int> row = pg.rank() < 4 ? std::vector<int>{2, 3} : std::vector<int>{4, 5};
    EXPECT_EQ(mesh["tp"].ranks(), row) << "rank " << pg.rank();
    EXPECT_EQ(mesh.group("tp")->global_ranks(), row) << "rank " << pg.rank();
  });
}

TEST(DeviceMesh, BadShapesAndNamesAreRefusedOnEveryRank) {
  on_every_rank(in_process_world(4), [](ProcessGroup& pg) {
    const int me = pg.rank();
    auto world = pg.shared_from_this();
    expect_contains(invalid_argument([&] { DeviceMesh(world, {2, 3}, {"dp", "tp"}); }),
                    "every rank gave bad arguments: shape {2, 3} holds more than the group's 4 ranks", me);
    expect_contains(invalid_argument([&] { DeviceMesh(world, {3}, {"dp"}); }), "shape {3} holds 3 ranks but the group has 4",
                    me);
    expect_contains(invalid_argument([&] { DeviceMesh(world, {4}, {"dp", "tp"}); }),
                    "'names' has 2 names for the 1 dimensions of shape {4}", me);
    expect_contains(invalid_argument([&] { DeviceMesh(world, {2, 2}, {"dp", "dp"}); }), "names 'dp' twice", me);
    expect_contains(invalid_argument([&] { DeviceMesh(world, {4, 0}, {"dp", "tp"}); }), "has extent < 1", me);
    // One rank with another shape: every rank fails, naming it, before any group is made.
    const std::vector<int> shape = me == 2 ? std::vector<int>{4, 1} : std::vector<int>{2, 2};
    expect_contains(invalid_argument([&] { DeviceMesh(world, shape, {"dp", "tp"}); }),
                    "rank 2 gave shape {4, 1} names ['dp', 'tp'] but rank 0 gave shape {2, 2}", me);
    // The world still works, and a good mesh comes after.
    DeviceMesh mesh(world, {2, 2}, {"dp", "tp"});
    expect_contains(invalid_argument([&] { mesh["pp"]; }), "names 'pp', which is none of ['dp', 'tp']", me);
    expect_contains(invalid_argument([&] { mesh["dp"].local_rank("tp"); }), "has no dimension 'tp'", me);
    expect_contains(invalid_argument([&] { mesh["tp"].slice({"dp"}); }), "spans dimensions outside this mesh", me);
  });
}

TEST(SplitGroup, ListOrderGivesRanksAndOneRanksBadListsFailEveryRank) {
  on_every_rank(in_process_world(5), [](ProcessGroup& pg) {
    const int me = pg.rank();
    // Rank 4 is in no list.
    auto sub = pg.split_group({{3, 1}, {0, 2}});
    if (me == 4) {
      EXPECT_EQ(sub, nullptr);
    } else {
      ASSERT_NE(sub, nullptr) << "rank " << me;
      const int expected_rank = me == 3 || me == 0 ? 0 : 1;
      EXPECT_EQ(sub->rank(), expected_rank) << "rank " << me;
      EXPECT_EQ(sub->global_ranks(), me % 2 ? (std::vector<int>{3, 1}) : (std::vector<int>{0, 2}));
      Tensor t = Tensor::of<int32_t>({me});
      sub->all_reduce(t)->wait();
      EXPECT_EQ(t.item(0), me % 2 ? 4 : 2) << "rank " << me;
    }
    sub.reset();
    // Bad lists on one rank only: every rank fails at once, naming it.
    std::vector<std::vector<int>> lists{{0, 1}, {2, 3}};
    if (me == 1) lists = {{0, 1}, {2, 7}};
    expect_contains(invalid_argument([&] { pg.split_group(lists); }),
                    "split_group #1 on group 'world': rank 1 gave bad arguments: split_ranks[1] names rank 7, "
                    "outside [0, 5)",
                    me);
    // Good lists that differ on one rank.
    lists = {{0, 1}, {2, 3}};
    if (me == 3) lists = {{0, 1, 2, 3}};
    expect_contains(invalid_argument([&] { pg.split_group(lists); }),
                    "rank 3 gave split_ranks [[0, 1, 2, 3]] but rank 0 gave split_ranks [[0, 1], [2, 3]]", me);
    expect_contains(invalid_argument([&] { pg.split_group({{0}, {}}); }), "split_ranks[1] is empty", me);
    expect_contains(invalid_argument([&] { pg.split_group({{0, 2, 0}}); }), "rank 0 is listed twice in split_ranks[0]",
                    me);
    // The group goes on.
    Tensor t = Tensor::of<int32_t>({1});
    pg.all_reduce(t)->wait();
    EXPECT_EQ(t.item(0), 5);
  });
}

}  // namespace
}  // namespace distcomm
