// The conformance suite (tests/backends/conformance) over hierarchical groups (backend
// "hier", and "auto" where it picks the hierarchy): shm within each simulated host, gloo
// across (api/hierarchical_backend.h). Hosts are simulated with DISTCOMM_HOST_ID per rank,
// so that this runs anywhere; tools/netns_hosts.sh runs the same over real network links.
//
// Layouts: 2 hosts x 2 ranks (the reduce_scatter / all_reduce / all_gather path, with
// counts that do not divide by 2 and so pad), 3 + 1 (uneven: through each host's local rank
// 0), 2 x 3, and 2 x 1 (one rank per host: the group runs flat, and says why). HierOps runs
// every op that goes by hosts (api/hier/) at sizes past the flat threshold, in several
// pipeline pieces with short and padded tails, roots off local rank 0, on those layouts and
// on hosts whose ranks are not consecutive (a, b, a, b and a, b, a, a).
#include <gtest/gtest.h>

#include <cstdlib>

#include "api/errors.h"
#include "api/init.h"
#include "tests/backends/conformance/conformance.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace {

using namespace conformance;  // NOLINT: the suite's check_* names read best unqualified here
using testing::GroupHarnessOptions;
using testing::run_group;

const int64_t kCounts[] = {0, 1, 7, 1000};
constexpr int64_t kLargeCount = 1 << 20;

struct Layout {
  std::string name;
  std::vector<std::string> hosts;  // DISTCOMM_HOST_ID of each rank
  std::string backend_name;        // what the group calls itself
};

// gtest prints the layout's name rather than its bytes.
void PrintTo(const Layout& layout, std::ostream* out) { *out << layout.name; }

GroupHarnessOptions on_hosts(const Layout& layout) {
  GroupHarnessOptions options;
  options.host_ids = layout.hosts;
  return options;
}

class HierConformance : public ::testing::TestWithParam<Layout> {
 protected:
  int size() const { return static_cast<int>(GetParam().hosts.size()); }
};

TEST_P(HierConformance, NamesItsLayoutAndReduces) {
  const std::string expected = GetParam().backend_name;
  const std::string& name = GetParam().name;
  const char* serving = name == "one_per_host" ? "gloo" : name == "one_host" ? "shm" : "hier";
  run_group(size(), "hier", [&](ProcessGroup& pg) {
    EXPECT_EQ(pg.backend_name(), expected);
    // The CPU ops go through the hierarchy (its all_reduce by hosts), or flat: gloo across
    // hosts of one rank each, shm within one host.
    EXPECT_EQ(pg.backend_for(DeviceType::kCPU).name(), serving);
    for (int64_t count : kCounts) sweep_reductions(pg, count);
    check_all_reduce(pg, DType::kFloat32, ReduceOp::SUM, 1001);  // pads on every layout
  }, on_hosts(GetParam()));
}

TEST_P(HierConformance, LargeCountAndInFlight) {
  run_group(size(), "hier", [](ProcessGroup& pg) {
    sweep_large(pg, kLargeCount);
    // Several 4 MiB pieces of the pipeline, the last one short and padded.
    check_all_reduce(pg, DType::kFloat32, ReduceOp::SUM, (3 << 20) + 5);
    check_all_reduce(pg, DType::kFloat64, ReduceOp::MAX, (1 << 20) + 3);
    check_many_in_flight(pg, 50, 1000);
    for (const ReduceCase& c : supported_reduce_cases()) check_all_reduce_coalesced(pg, c.dtype, c.op);
  }, on_hosts(GetParam()));
}

TEST_P(HierConformance, DataMovementPointToPointAndGroups) {
  run_group(size(), "hier", [](ProcessGroup& pg) {
    for (int64_t count : kCounts) sweep_data_movement(pg, count);
    sweep_point_to_point(pg, 1000);
    check_new_group(pg);
    check_split(pg);
    check_split_group(pg);
    check_object_collectives(pg);
    check_invalid_arguments(pg);
  }, on_hosts(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, HierConformance,
    ::testing::Values(
        Layout{"two_by_two", {"a", "a", "b", "b"}, "hier (cpu: shm within hosts, gloo across; 2 hosts x 2 ranks)"},
        Layout{"three_plus_one", {"a", "a", "a", "b"}, "hier (cpu: shm within hosts, gloo across; 2 hosts (3 + 1 ranks))"},
        Layout{"two_by_three", {"a", "a", "a", "b", "b", "b"},
               "hier (cpu: shm within hosts, gloo across; 2 hosts x 3 ranks)"},
        Layout{"one_per_host", {"a", "b"}, "hier (cpu: gloo, flat: one rank per host)"},
        // A hier group within one host is shm's (a review found gloo over loopback there).
        Layout{"one_host", {"a", "a", "a"}, "hier (cpu: shm, flat: one host)"}),
    [](const ::testing::TestParamInfo<Layout>& info) { return info.param.name; });

// hier_across = mpi where no rank was started by mpirun: refused at creation on every rank,
// naming the first rank that cannot run it (tests/backends/mpi:hier_over_mpi_test_* run it
// under mpirun, where it works).
TEST(HierAcross, MpiWithoutMpirunIsRefusedNamingTheRank) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp");
  const std::string store = dir + "/hier_across_mpi_store";
  testing::run_ranks(4, [&](int rank, int size) {
    ::setenv("DISTCOMM_HOST_ID", rank < 2 ? "a" : "b", 1);
    InitOptions o;
    o.backend = "hier";
    o.rank = rank;
    o.world_size = size;
    o.timeout = std::chrono::seconds(30);
    o.init_method = "file://" + store;
    o.backend_config["hier_across"] = "mpi";
    try {
      init_process_group(o);
      ADD_FAILURE() << "rank " << rank << ": hier_across=mpi without mpirun made a group";
      destroy_process_group();
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("rank 0 cannot run mpi across hosts"), std::string::npos) << e.what();
    }
  });
}

// The ops api/hier/ runs by hosts, each at sizes that take the hierarchy (past the flat
// thresholds: 256 KiB for broadcast, 4 MiB of the larger tensor for all_gather and
// reduce_scatter, 64 KiB for reduce): float32 counts of (3 << 20) + 5 (about 12 MiB: three
// 4 MiB pieces of the pipeline and a short one, and a count no host size divides, so
// shares pad), others in one or two pieces. Values are exact.
class HierOps : public ::testing::TestWithParam<Layout> {
 protected:
  int size() const { return static_cast<int>(GetParam().hosts.size()); }
};

constexpr int64_t kPiecesCount = (3 << 20) + 5;
constexpr int64_t kMiBCount = (1 << 18) + 3;

TEST_P(HierOps, BroadcastAndReduce) {
  run_group(size(), "hier", [](ProcessGroup& pg) {
    ASSERT_EQ(pg.backend_for(DeviceType::kCPU).name(), "hier");
    const int last = pg.size() - 1;
    check_broadcast(pg, DType::kFloat32, kPiecesCount, 1);
    check_broadcast(pg, DType::kFloat64, kMiBCount, last);
    check_broadcast(pg, DType::kInt8, kMiBCount, 0);
    check_reduce(pg, DType::kFloat32, ReduceOp::SUM, kPiecesCount, 1);
    check_reduce(pg, DType::kInt64, ReduceOp::MAX, kMiBCount, last);
    check_reduce(pg, DType::kFloat32, ReduceOp::AVG, kMiBCount, 0);
  }, on_hosts(GetParam()));
}

TEST_P(HierOps, AllGatherAndReduceScatter) {
  run_group(size(), "hier", [](ProcessGroup& pg) {
    ASSERT_EQ(pg.backend_for(DeviceType::kCPU).name(), "hier");
    // Per rank, so that the whole (all_gather's output, reduce_scatter's input) is about
    // 12 MiB of float32 (3 pieces and a short one), or 4 to 6 MiB of the others.
    const int64_t per_rank = kPiecesCount / pg.size();
    const int64_t mib = (1 << 20) / pg.size();
    check_all_gather(pg, DType::kFloat32, per_rank, conformance::Layout::kTensor);
    check_all_gather(pg, DType::kFloat32, kMiBCount, conformance::Layout::kInPlace);
    check_all_gather(pg, DType::kInt8, 5 * mib + 3, conformance::Layout::kList);
    check_reduce_scatter(pg, DType::kFloat32, ReduceOp::SUM, per_rank, conformance::Layout::kTensor);
    check_reduce_scatter(pg, DType::kInt32, ReduceOp::MIN, kMiBCount, conformance::Layout::kList);
    check_reduce_scatter(pg, DType::kBFloat16, ReduceOp::premul_sum(0.5), 3 * mib + 1, conformance::Layout::kTensor);
  }, on_hosts(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, HierOps,
    ::testing::Values(Layout{"two_by_two", {"a", "a", "b", "b"}, ""},
                      Layout{"three_plus_one", {"a", "a", "a", "b"}, ""},
                      Layout{"two_by_three", {"a", "a", "a", "b", "b", "b"}, ""},
                      Layout{"interleaved", {"a", "b", "a", "b"}, ""},
                      Layout{"interleaved_uneven", {"a", "b", "a", "a"}, ""}),
    [](const ::testing::TestParamInfo<Layout>& info) { return info.param.name; });

TEST(HierAuto, AutoPicksTheHierarchyForSeveralHostsWithSeveralRanks) {
  GroupHarnessOptions options;
  options.host_ids = {"a", "a", "b", "b"};
  run_group(4, "auto", [](ProcessGroup& pg) {
    EXPECT_EQ(pg.backend_name(), "auto (cpu: shm within hosts, gloo across; 2 hosts x 2 ranks)");
    EXPECT_EQ(pg.backend_for(DeviceType::kCPU).name(), "hier");
    check_all_reduce(pg, DType::kFloat32, ReduceOp::SUM, 1001);
  }, options);
  options.host_ids = {"a", "b"};
  run_group(2, "auto", [](ProcessGroup& pg) { EXPECT_EQ(pg.backend_name(), "auto (cpu: gloo)"); }, options);
  options.host_ids = {"a", "a"};
  run_group(2, "auto", [](ProcessGroup& pg) { EXPECT_EQ(pg.backend_name(), "auto (cpu: shm)"); }, options);
}

TEST(HierLayout, InterleavedHostsAndAMesh) {
  GroupHarnessOptions options;
  options.host_ids = {"a", "b", "a", "b"};  // host a holds ranks 0 and 2
  run_group(4, "hier", [](ProcessGroup& pg) {
    EXPECT_EQ(pg.backend_name(), "hier (cpu: shm within hosts, gloo across; 2 hosts x 2 ranks)");
    for (int64_t count : kCounts) sweep_reductions(pg, count);
    check_device_mesh(pg, {2, 2});
  }, options);
}

}  // namespace
}  // namespace distcomm
