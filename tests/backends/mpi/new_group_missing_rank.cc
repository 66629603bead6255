// new_group([0, 1, 2]) where rank 2 never calls new_group: ranks 0 and 1 get a Timeout
// naming group rank 2 within the group's timeout (5 s) + 5 s, and say every 0.5 s that
// they wait for it (mpirun_test.sh checks those lines in the output). Creating the group's
// communicator (MPI_Comm_dup) would wait for rank 2 forever and name nobody; the arrival
// step before it names the members that have not come. Then everyone ends cleanly: rank 2
// waits until ranks 0 and 1 have checked (marker files), and the job succeeds.
//
// With the argument "subset", ranks 0 and 1 call new_group([0, 2]) instead: rank 0 names its
// missing member by group and world rank ("ranks [1] (world ranks [2])": the
// MPI_Comm_create_group path), rank 1 is no member and returns at once.
//
// With the argument "late", rank 2 then calls new_group([0, 1, 2]) itself, while ranks 0 and
// 1 wait (in a marker) outside MPI. The messages they sent when they arrived are there, so
// rank 2 goes on to MPI_Comm_dup, which they never join: it too must end in Timeout within
// the timeout + 5 s, and rank 2's process must end at exit although that call is still
// inside MPI (without MPI_Finalize, saying so); mpirun then ends the job.
#include <chrono>
#include <cstdio>
#include <string>

#include "api/errors.h"
#include "api/init.h"
#include "tests/backends/mpi/job_markers.h"
#include "tests/backends/mpi/timeout_verdict.h"

namespace {

// The group's timeout; the bound is the timeout + 5 s.
constexpr std::chrono::seconds kTimeout{5};
constexpr double kMin = 4.9, kMax = 5.0 + 5.0;

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const bool late = mode == "late";
  distcomm::InitOptions o;
  o.backend = "mpi";
  o.timeout = kTimeout;
  o.init_report_interval = std::chrono::milliseconds(500);
  distcomm::ProcessGroupPtr pg = distcomm::init_process_group(o);
  pg->barrier()->wait();
  using namespace distcomm::testing;
  if (pg->rank() == 2) {
    if (wait_for_markers("new_group_failed", {0, 1}).empty()) return 1;
    if (!late) return 0;
    // Rank 2 with "late": the others' arrival messages are there, they are not.
    const bool ok = expect_timeout("rank 2", "late new_group", [&] { pg->new_group({0, 1, 2}); },
                                   "to create the group's MPI communicator (MPI_Comm_dup", kMin, kMax);
    write_marker("late_new_group_failed");
    return ok ? 0 : 1;
  }
  bool ok = false;
  if (mode == "subset" && pg->rank() == 1) {
    ok = pg->new_group({0, 2}) == nullptr;
    std::printf("rank 1: %s\n", ok ? "no member of new_group([0, 2]), as it must" : "FAILED: got a group of [0, 2]");
  } else if (mode == "subset") {
    ok = expect_timeout("rank 0", "new_group of a subset", [&] { pg->new_group({0, 2}); },
                        "waiting for ranks [1] (world ranks [2]) to arrive", kMin, kMax);
  } else {
    ok = expect_timeout("rank " + std::to_string(pg->rank()), "new_group", [&] { pg->new_group({0, 1, 2}); },
                        "waiting for ranks [2] to arrive", kMin, kMax);
  }
  write_marker("new_group_failed");
  // With "late", rank 2's process ends without finalizing, and mpirun ends the job then:
  // stay out of MPI until it has checked.
  if (late) wait_for_markers("late_new_group_failed", {2});
  return ok ? 0 : 1;
}
