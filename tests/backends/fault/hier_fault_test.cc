// The fault-conformance suite (fault_suite.h) on a hierarchical group (backend "hier":
// shm within hosts, gloo across, api/hierarchical_backend.h): three forked ranks on two
// simulated hosts (DISTCOMM_HOST_ID a, a, b), so that its all_reduce runs by hosts, through
// groups within and across them, and must fail as every backend's does.
#include "tests/backends/fault/fault_suite.h"
#include "tests/backends/fault/forked_runner.h"

namespace distcomm {
namespace fault {

INSTANTIATE_TEST_SUITE_P(hier, FaultSuite, ::testing::Values(forked_runner("hier", {"a", "a", "b"})), runner_name);

}  // namespace fault
}  // namespace distcomm
