// The conformance suite (tests/backends/conformance) on the gloo backend, over world sizes
// 1-4 (odd sizes catch ring bugs). Each test forks one group and runs many cases in it:
// creating the group is the slow part.
//
// Counts 0, 1, 7 and 1000 run every supported (dtype, op) pair and every dtype; 1 << 20
// runs the subset in conformance::sweep_large (float32 sum/max, bfloat16 and int64 sum,
// float16 reduce, float32 reduce_scatter/broadcast/all_gather), to keep the suite well
// under two minutes on two cores.
#include <gtest/gtest.h>

#include "tests/backends/conformance/conformance.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace {

using namespace conformance;  // NOLINT: the suite's check_* names read best unqualified here
using testing::GroupHarnessOptions;
using testing::run_group;

const int64_t kCounts[] = {0, 1, 7, 1000};
constexpr int64_t kLargeCount = 1 << 20;

class GlooConformance : public ::testing::TestWithParam<int> {
 protected:
  int world() const { return GetParam(); }
};

TEST_P(GlooConformance, Reductions) {
  run_group(world(), "gloo", [](ProcessGroup& pg) {
    for (int64_t count : kCounts) sweep_reductions(pg, count);
  });
}

TEST_P(GlooConformance, DataMovement) {
  run_group(world(), "gloo", [](ProcessGroup& pg) {
    for (int64_t count : kCounts) sweep_data_movement(pg, count);
  });
}

TEST_P(GlooConformance, LargeCount) {
  run_group(world(), "gloo", [](ProcessGroup& pg) { sweep_large(pg, kLargeCount); });
}

TEST_P(GlooConformance, InFlightAndCoalesced) {
  run_group(world(), "gloo", [](ProcessGroup& pg) {
    check_many_in_flight(pg, 50, 1000);
    for (const ReduceCase& c : supported_reduce_cases()) check_all_reduce_coalesced(pg, c.dtype, c.op);
  });
}

TEST_P(GlooConformance, PointToPoint) {
  if (world() < 2) GTEST_SKIP() << "point-to-point needs two ranks";
  run_group(world(), "gloo", [](ProcessGroup& pg) {
    sweep_point_to_point(pg, kLargeCount);
  });
}

TEST_P(GlooConformance, SubgroupsAndBadArguments) {
  run_group(world(), "gloo", [](ProcessGroup& pg) {
    check_new_group(pg);
    check_split(pg);
    check_split_group(pg);
    check_object_collectives(pg);
    check_invalid_arguments(pg);
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, GlooConformance, ::testing::Values(1, 2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& info) { return "world" + std::to_string(info.param); });

// Every all_reduce algorithm (config "algorithm") on an odd and a power-of-two group:
// every (dtype, op) pair, and a large count that takes many segments.
class GlooAlgorithms : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(GlooAlgorithms, AllReduce) {
  GroupHarnessOptions options;
  options.backend_config["algorithm"] = std::get<0>(GetParam());
  run_group(std::get<1>(GetParam()), "gloo", [](ProcessGroup& pg) {
    for (const ReduceCase& c : supported_reduce_cases()) {
      for (int64_t count : {int64_t{1}, int64_t{7}, int64_t{1000}}) check_all_reduce(pg, c.dtype, c.op, count);
    }
    check_all_reduce(pg, DType::kFloat32, ReduceOp::SUM, 300000);
  }, options);
}

INSTANTIATE_TEST_SUITE_P(Algorithms, GlooAlgorithms,
                         ::testing::Combine(::testing::Values("ring", "ring_chunked", "halving_doubling", "bcube"),
                                            ::testing::Values(3, 4)),
                         [](const ::testing::TestParamInfo<std::tuple<std::string, int>>& info) {
                           return std::get<0>(info.param) + "_world" + std::to_string(std::get<1>(info.param));
                         });

// DeviceMesh, 2x2 and 2x3 (each dimension's groups split from the world).
TEST(GlooDeviceMesh, TwoByTwoAndTwoByThree) {
  run_group(4, "gloo", [](ProcessGroup& pg) { check_device_mesh(pg, {2, 2}); });
  run_group(6, "gloo", [](ProcessGroup& pg) { check_device_mesh(pg, {2, 3}); });
}

// The same group over a TCPStore served by rank 0, instead of a FileStore.
TEST(GlooOverTcpStore, CollectivesAndSubgroups) {
  GroupHarnessOptions options;
  options.store = testing::StoreKind::kTcp;
  run_group(3, "gloo", [](ProcessGroup& pg) {
    sweep_data_movement(pg, 7);
    check_all_reduce(pg, DType::kFloat32, ReduceOp::SUM, 1000);
    check_new_group(pg);
    check_split(pg);
  }, options);
}

}  // namespace
}  // namespace distcomm
