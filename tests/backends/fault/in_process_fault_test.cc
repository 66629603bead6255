// The fault-conformance suite (fault_suite.h) on the in_process test plugin: three ranks
// as threads of this process, to check the suite's expectations of the ProcessGroup and
// of a backend that keeps them without processes or sockets.
#include "tests/backends/fault/fault_suite.h"
#include "tests/backends/fault/in_process_runner.h"

namespace distcomm {
namespace fault {

INSTANTIATE_TEST_SUITE_P(in_process, FaultSuite, ::testing::Values(in_process_runner()), runner_name);

}  // namespace fault
}  // namespace distcomm
