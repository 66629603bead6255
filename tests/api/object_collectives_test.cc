// The object collectives (api/object_collectives.h) over the in_process test plugin (N
// ProcessGroups in one process), at 1 to 5 ranks; the same conformance check runs over gloo,
// shm, auto, mpi and the hierarchy in their suites.
#include <gtest/gtest.h>

#include "tests/backends/conformance/conformance.h"
#include "tests/testing/in_process_group.h"

namespace distcomm {
namespace {

TEST(ObjectCollectives, OneToFiveRanks) {
  for (int size = 1; size <= 5; ++size) {
    testing::on_every_rank(testing::in_process_world(size),
                           [](ProcessGroup& pg) { conformance::check_object_collectives(pg); });
  }
}

}  // namespace
}  // namespace distcomm
