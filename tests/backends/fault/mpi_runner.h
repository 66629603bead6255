// A fault-suite Runner for the processes of one mpirun job (mpirun -np 3): each process is
// one rank and runs every case for its rank, making a fresh world group per case with
// init_process_group over a FileStore in the test's folder (so that a Timeout can name
// the ranks that did not come). Its ranks cannot die alone: mpirun ends the job.
#pragma once

#include "tests/backends/fault/fault_suite.h"

namespace distcomm {
namespace fault {

RunnerPtr mpi_runner();

}  // namespace fault
}  // namespace distcomm
