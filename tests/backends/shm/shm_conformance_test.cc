// The conformance suite (tests/backends/conformance) on the shm backend, at 1-4 ranks:
// on a 2-core machine 3 and 4 ranks are more ranks than cores, where a rank that spins
// would starve the one it waits for (the backend must sleep instead).
//
// Each case runs twice: with the default settings, and with tiny staging ("small": 4 KiB
// slots, two of them, 128-byte p2p chunks, no one-round path), so that even the small
// counts go through many rounds, slot reuse, the chunked reduce-scatter + all-gather and
// multi-chunk messages, which the default settings only reach at megabytes.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>

#include "tests/backends/conformance/conformance.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace {

using namespace conformance;  // NOLINT: the suite's check_* names read best unqualified here
using testing::GroupHarnessOptions;
using testing::run_group;

const int64_t kCounts[] = {0, 1, 7, 1000};
constexpr int64_t kLargeCount = 1 << 20;

std::map<std::string, std::string> settings(const std::string& name) {
  if (name == "small") {
    return {{"shm_slot_bytes", "4096"},
            {"shm_slots", "2"},
            {"shm_small_bytes", "0"},
            {"shm_p2p_chunk_bytes", "128"},
            {"shm_p2p_depth", "2"}};
  }
  return {};
}

class ShmConformance : public ::testing::TestWithParam<std::tuple<int, std::string>> {
 protected:
  int world() const { return std::get<0>(GetParam()); }
  GroupHarnessOptions options() const {
    GroupHarnessOptions o;
    o.backend_config = settings(std::get<1>(GetParam()));
    return o;
  }
};

TEST_P(ShmConformance, Reductions) {
  run_group(world(), "shm", [](ProcessGroup& pg) {
    for (int64_t count : kCounts) sweep_reductions(pg, count);
  }, options());
}

TEST_P(ShmConformance, DataMovement) {
  run_group(world(), "shm", [](ProcessGroup& pg) {
    for (int64_t count : kCounts) sweep_data_movement(pg, count);
  }, options());
}

TEST_P(ShmConformance, LargeCount) {
  run_group(world(), "shm", [](ProcessGroup& pg) { sweep_large(pg, kLargeCount); }, options());
}

// Messages between one round's worth and a few slots: with the default settings they go
// in pieces smaller than a slot (pipeline_piece), the last one short, so that the writer
// and its readers copy at once.
TEST_P(ShmConformance, MessagesOfAFewPieces) {
  run_group(world(), "shm", [](ProcessGroup& pg) {
    const int last = pg.size() - 1;
    for (int64_t count : {int64_t{16385}, int64_t{300001}}) {
      check_broadcast(pg, DType::kFloat32, count, last);
      check_all_gather(pg, DType::kFloat32, count, Layout::kTensor);
      check_gather(pg, DType::kFloat32, count, 0);
      check_reduce_scatter(pg, DType::kFloat32, ReduceOp::SUM, count, Layout::kTensor);
    }
  }, options());
}

TEST_P(ShmConformance, InFlightAndCoalesced) {
  run_group(world(), "shm", [](ProcessGroup& pg) {
    check_many_in_flight(pg, 50, 1000);
    for (const ReduceCase& c : supported_reduce_cases()) check_all_reduce_coalesced(pg, c.dtype, c.op);
  }, options());
}

TEST_P(ShmConformance, PointToPoint) {
  if (world() < 2) GTEST_SKIP() << "point-to-point needs two ranks";
  run_group(world(), "shm", [](ProcessGroup& pg) {
    sweep_point_to_point(pg, kLargeCount);
  }, options());
}

TEST_P(ShmConformance, SubgroupsAndBadArguments) {
  run_group(world(), "shm", [](ProcessGroup& pg) {
    check_new_group(pg);
    check_split(pg);
    check_split_group(pg);
    check_object_collectives(pg);
    check_invalid_arguments(pg);
  }, options());
}

// DeviceMesh, 2x2 and 2x3, on shm and on auto (which picks shm on one host).
TEST(ShmDeviceMesh, TwoByTwoAndTwoByThree) {
  for (const char* backend : {"shm", "auto"}) {
    run_group(4, backend, [](ProcessGroup& pg) { check_device_mesh(pg, {2, 2}); });
    run_group(6, backend, [](ProcessGroup& pg) { check_device_mesh(pg, {2, 3}); });
  }
}

// The object collectives over auto (shm here), besides shm's own above.
TEST(ShmObjectCollectives, OverAuto) {
  run_group(3, "auto", [](ProcessGroup& pg) { check_object_collectives(pg); });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, ShmConformance,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4), ::testing::Values("default", "small")),
                         [](const ::testing::TestParamInfo<std::tuple<int, std::string>>& info) {
                           return "world" + std::to_string(std::get<0>(info.param)) + "_" + std::get<1>(info.param);
                         });

}  // namespace
}  // namespace distcomm
