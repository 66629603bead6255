// The conformance suite (tests/backends/conformance) on the mpi backend. mpirun_test.sh
// starts the ranks (-np 1 to 4); each makes the world group with init_process_group and
// runs every check, in the same order as the others.
//
// Counts 0, 1, 7 and 1000 run every supported (dtype, op) pair and every dtype; 1 << 20
// runs the subset in conformance::sweep_large, to keep the suite short on two cores.
//
// As init makes it for mpi, the world has no store: split's colors and keys travel
// through the group's own collectives (ProcessGroup::exchange()).
#include <gtest/gtest.h>

#include <string>

#include "api/init.h"
#include "tests/backends/conformance/conformance.h"

namespace distcomm {
namespace {

using namespace conformance;  // NOLINT: the suite's check_* names read best unqualified here

const int64_t kCounts[] = {0, 1, 7, 1000};
constexpr int64_t kLargeCount = 1 << 20;

class MpiWorld : public ::testing::Environment {
 public:
  void SetUp() override {
    InitOptions o;
    o.backend = "mpi";
    o.timeout = std::chrono::seconds(60);
    init_process_group(o);
  }
  void TearDown() override { destroy_process_group(); }
};
[[maybe_unused]] ::testing::Environment* const kWorld = ::testing::AddGlobalTestEnvironment(new MpiWorld);

ProcessGroup& world() { return default_group(); }

TEST(MpiConformance, Reductions) {
  for (int64_t count : kCounts) sweep_reductions(world(), count);
}

TEST(MpiConformance, DataMovement) {
  for (int64_t count : kCounts) sweep_data_movement(world(), count);
}

TEST(MpiConformance, LargeCount) { sweep_large(world(), kLargeCount); }

TEST(MpiConformance, InFlightAndCoalesced) {
  check_many_in_flight(world(), 50, 1000);
  for (const ReduceCase& c : supported_reduce_cases()) check_all_reduce_coalesced(world(), c.dtype, c.op);
}

TEST(MpiConformance, PointToPoint) {
  if (world().size() < 2) GTEST_SKIP() << "point-to-point needs two ranks";
  sweep_point_to_point(world(), kLargeCount);
}

TEST(MpiConformance, SubgroupsAndBadArguments) {
  check_new_group(world());
  check_split(world());
  check_split_group(world());
  check_object_collectives(world());
  check_invalid_arguments(world());
}

TEST(MpiConformance, DeviceMesh) {
  if (world().size() != 4) GTEST_SKIP() << "a 2x2 mesh needs 4 ranks (this run has " << world().size() << ")";
  check_device_mesh(world(), {2, 2});
}

}  // namespace
}  // namespace distcomm
