// The hierarchy over mpi (shm within hosts a and b, mpi across) when rank 3 alone fails its
// part of the creation: a bad shm setting, found when its shm level is made, after MPI has
// started on every rank (the world's flat backend is mpi). Rank 2 waits for it in their
// host's shm level; ranks 0 and 1 wait in the levels across, where rank 3 (and rank 2, which
// failed in turn) never come. Every rank must end its init within seconds, not at the 60 s
// timeout, each naming rank 3 and its setting; the job then ends cleanly (every rank
// finalizes MPI at exit), so mpirun_test.sh expects it to succeed with each rank's verdict.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "api/errors.h"
#include "api/init.h"
#include "tests/backends/mpi/job_markers.h"

int main() {
  using namespace distcomm;
  using Clock = std::chrono::steady_clock;
  const int rank = testing::job_rank();
  const char* hosts[] = {"a", "a", "b", "b"};
  ::setenv("DISTCOMM_HOST_ID", hosts[rank % 4], 1);
  ::setenv("DISTCOMM_HIER_ACROSS", "mpi", 1);
  const char* dir = std::getenv("TEST_TMPDIR");
  InitOptions o;
  o.backend = "hier";
  o.timeout = std::chrono::seconds(60);
  o.init_method = std::string("file://") + (dir ? dir : "/tmp") + "/hier_creation_failure_store";
  if (rank == 3) o.backend_config["shm_slots"] = "1";  // below its minimum, 2
  const auto start = Clock::now();
  std::string message, kind;
  try {
    init_process_group(o);
    kind = "none";
  } catch (const InvalidArgument& e) {
    kind = "InvalidArgument";
    message = e.what();
  } catch (const PeerFailure& e) {
    kind = "PeerFailure";
    message = e.what();
  } catch (const Error& e) {
    kind = "another error";
    message = e.what();
  }
  const double took = std::chrono::duration<double>(Clock::now() - start).count();
  const bool names_it = message.find("shm_slots") != std::string::npos &&
                        (rank == 3 || message.find("rank 3") != std::string::npos);
  const bool ok = kind == (rank == 3 ? "InvalidArgument" : "PeerFailure") && names_it && took < 15.0;
  std::printf("rank %d: init %s (%s after %.1f s): %s\n", rank, ok ? "failed as it must" : "DID NOT fail as it must",
              kind.c_str(), took, message.c_str());
  std::fflush(stdout);
  // None leaves before all have checked: mpirun may end the job when the first one exits.
  testing::write_marker("checked");
  testing::wait_for_markers("checked", {0, 1, 2, 3});
  return ok ? 0 : 1;
}
