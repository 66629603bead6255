// The fault-conformance suite (fault_suite.h) on the mpi backend: run by every process of
// an mpirun -np 3 job (BUILD), each the rank mpirun made it.
#include "tests/backends/fault/fault_suite.h"
#include "tests/backends/fault/mpi_runner.h"

namespace distcomm {
namespace fault {

INSTANTIATE_TEST_SUITE_P(mpi, FaultSuite, ::testing::Values(mpi_runner()), runner_name);

}  // namespace fault
}  // namespace distcomm
