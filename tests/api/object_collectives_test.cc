// The object collectives (api/object_collectives.h) over the in_process test plugin (N
// ProcessGroups in one process), at 1 to 5 ranks; the same conformance check runs over gloo,
// shm, auto, mpi and the hierarchy in their suites.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "api/object_collectives.h"
#include "api/tensor.h"

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

// Memory the host cannot give inside an object collective is refused naming the rank, the
// group and the collective, still as a std::bad_alloc (TensorAllocationError): it said only
// "cannot allocate N bytes of host memory for uint8[N] on cpu". In a child (a death test)
// under RLIMIT_AS: 32 MiB of address space left, the 64 MiB padded copy cannot be made.
void all_gather_object_under_a_memory_limit() {
  std::vector<ProcessGroupPtr> world = testing::in_process_world(1);
  ProcessGroup& pg = *world[0];
  all_gather_object(pg, "warm");  // the plugin's threads and arenas, before the limit
  const std::string big(size_t{64} << 20, 'x');
  long pages = 0;
  std::ifstream("/proc/self/statm") >> pages;
  const rlim_t limit = static_cast<rlim_t>(pages) * static_cast<rlim_t>(::sysconf(_SC_PAGESIZE)) + (rlim_t{32} << 20);
  const rlimit rl{limit, limit};
  if (::setrlimit(RLIMIT_AS, &rl) != 0) _exit(5);
  try {
    all_gather_object(pg, big);
    std::fprintf(stderr, "all_gather_object returned\n");
    _exit(0);
  } catch (const TensorAllocationError& e) {
    std::fprintf(stderr, "TensorAllocationError: %s\n", e.what());
    _exit(3);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "other: %s\n", e.what());
    _exit(4);
  }
}

TEST(ObjectCollectivesDeathTest, AnAllocationThatFailsNamesTheRankGroupAndCollective) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(all_gather_object_under_a_memory_limit(), ::testing::ExitedWithCode(3),
              "TensorAllocationError: rank 0/1 group '[^']*': all_gather_object: cannot allocate [0-9]+ bytes of host "
              "memory for uint8\\[67108864\\] on cpu");
}

}  // namespace
}  // namespace distcomm
