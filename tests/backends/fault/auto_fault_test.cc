// The fault-conformance suite (fault_suite.h) on the auto backend, which picks shm on one
// host: three forked ranks that meet through init_process_group, as a program's do.
#include "tests/backends/fault/fault_suite.h"
#include "tests/backends/fault/forked_runner.h"

namespace distcomm {
namespace fault {

INSTANTIATE_TEST_SUITE_P(auto, FaultSuite, ::testing::Values(forked_runner("auto")), runner_name);

}  // namespace fault
}  // namespace distcomm
