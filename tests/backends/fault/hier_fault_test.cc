// The fault-conformance suite (fault_suite.h) on a hierarchical group (backend "hier":
// shm within hosts, gloo across, api/hierarchical_backend.h), on simulated hosts
// (DISTCOMM_HOST_ID): 2 + 1 ranks, 2 hosts x 2 ranks (every local rank has a peer across,
// the even layout's path) and 3 + 1 (hosts of different sizes, through local rank 0), so
// that its ops run by hosts, through groups within and across them, and must fail as
// every backend's do.
#include "tests/backends/fault/fault_suite.h"
#include "tests/backends/fault/forked_runner.h"

namespace distcomm {
namespace fault {

INSTANTIATE_TEST_SUITE_P(hier, FaultSuite, ::testing::Values(forked_runner("hier", {"a", "a", "b"})), runner_name);
INSTANTIATE_TEST_SUITE_P(hier2x2, FaultSuite, ::testing::Values(forked_runner("hier", {"a", "a", "b", "b"})),
                         runner_name);
INSTANTIATE_TEST_SUITE_P(hier3and1, FaultSuite, ::testing::Values(forked_runner("hier", {"a", "a", "a", "b"})),
                         runner_name);

}  // namespace fault
}  // namespace distcomm
