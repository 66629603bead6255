// Rank 2 of 3 calls init_process_group late: only after ranks 0 and 1 have given up (a
// marker file each writes after its init failed) and their processes have ended. Open
// MPI's MPI_Init waits for every process of the job, so ranks 0 and 1 must
//   - fail with Timeout within the timeout (3 s) + 5 s, naming what they waited for,
//   - say every 0.5 s (DISTCOMM_INIT_REPORT_SECONDS) that they still wait,
//   - and end when main returns, although their MPI thread is still inside MPI_Init: no
//     MPI_Finalize, no crash, no hang, one line on stderr saying so.
// mpirun then ends the job (a process exited without finalizing), usually before rank 2
// gets to call init at all. mpirun_test.sh checks the job fails in bounded time, with each
// rank's verdict, report lines and exit line in the output.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "api/errors.h"
#include "api/init.h"
#include "tests/backends/mpi/job_markers.h"
#include "tests/backends/mpi/timeout_verdict.h"

namespace {

distcomm::InitOptions options() {
  distcomm::InitOptions o;
  o.backend = "mpi";
  o.timeout = std::chrono::seconds(3);
  return o;
}

}  // namespace

int main() {
  using namespace distcomm::testing;
  setenv("DISTCOMM_INIT_REPORT_SECONDS", "0.5", 1);
  const int rank = job_rank();
  if (rank == 2) {
    const std::vector<pid_t> gave_up = wait_for_markers("init_failed", {0, 1});
    for (pid_t pid : gave_up) {
      while (!process_ended(pid)) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    // mpirun has normally ended the job by now; if not, this init cannot meet the others.
    std::printf("rank 2: calling init_process_group late\n");
    std::fflush(stdout);
    try {
      distcomm::init_process_group(options());
    } catch (const distcomm::Error& e) {
      std::printf("rank 2: %s\n", e.what());
    }
    return 0;
  }
  const bool ok = expect_timeout("rank " + std::to_string(rank), "init", [] { distcomm::init_process_group(options()); },
                                 "the other ranks of the mpirun job to start MPI", 2.9, 3.0 + 5.0);
  write_marker("init_failed");
  // Neither leaves before both have checked: mpirun ends the job when the first one exits.
  wait_for_markers("init_failed", {0, 1});
  return ok ? 0 : 1;
}
