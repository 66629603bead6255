// The fault-conformance suite (fault_suite.h) on the shm backend: three forked ranks that
// meet through init_process_group, as a program's do.
#include "tests/backends/fault/fault_suite.h"
#include "tests/backends/fault/forked_runner.h"

namespace distcomm {
namespace fault {

INSTANTIATE_TEST_SUITE_P(shm, FaultSuite, ::testing::Values(forked_runner("shm")), runner_name);

}  // namespace fault
}  // namespace distcomm
