// The fault-conformance suite (fault_suite.h) on the shm backend: three forked ranks that
// meet through init_process_group, as a program's do, and four (a bystander more: rank 3
// takes no part in what ranks 0-2 disagree on).
#include "tests/backends/fault/fault_suite.h"
#include "tests/backends/fault/forked_runner.h"

namespace distcomm {
namespace fault {

INSTANTIATE_TEST_SUITE_P(shm, FaultSuite, ::testing::Values(forked_runner("shm")), runner_name);
INSTANTIATE_TEST_SUITE_P(shm4, FaultSuite, ::testing::Values(forked_runner_of("shm", 4)), runner_name);

}  // namespace fault
}  // namespace distcomm
