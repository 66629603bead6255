// Rank 0's all_reduce on a group times out (the others have not issued it) while MPI still
// holds its agreement check, and rank 0 destroys the group. Ranks 1 and 2 then issue that
// all_reduce: their messages complete rank 0's given-up check, whose next round would run
// on the group's communicator. That communicator must still be alive: Open MPI 4.1 freed
// with a nonblocking collective pending kills rank 0 with SIGSEGV inside MPI_Test, and
// mpirun with it the whole job (abandoned_ops.h). Ranks 1 and 2 must get their Timeout,
// and every rank must go on to use its world group and finalize cleanly: the job succeeds
// (mpirun_test.sh), each rank saying so.
#include <chrono>
#include <cstdio>
#include <string>

#include "api/errors.h"
#include "api/init.h"
#include "tests/backends/mpi/timeout_verdict.h"

int main() {
  using std::chrono::milliseconds;
  distcomm::InitOptions o;
  o.backend = "mpi";
  o.timeout = std::chrono::seconds(60);
  distcomm::ProcessGroupPtr world = distcomm::init_process_group(o);
  const int rank = world->rank();
  const std::string who = "rank " + std::to_string(rank);
  distcomm::ProcessGroupPtr group = world->new_group({0, 1, 2});  // the group this test breaks
  bool ok = true;
  distcomm::Tensor t = distcomm::Tensor::zeros({4});
  distcomm::AllReduceOptions short_timeout;
  if (rank == 0) {
    short_timeout.timeout = milliseconds(300);
    ok = distcomm::testing::expect_timeout(who, "the all_reduce nobody joined", [&] { group->all_reduce(t, short_timeout)->wait(); },
                                           "within 300 ms", 0.3, 10);
    group.reset();  // destroyed while MPI holds its check
  }
  world->barrier()->wait();  // rank 0 has destroyed its group
  if (rank != 0) {
    short_timeout.timeout = milliseconds(1000);
    ok = distcomm::testing::expect_timeout(who, "the all_reduce rank 0 gave up", [&] { group->all_reduce(t, short_timeout)->wait(); },
                                           "within 1000 ms", 1.0, 10);
    group.reset();
  }
  // Rank 0 drives MPI here while the others' messages reach its given-up check.
  distcomm::Tensor sum = distcomm::Tensor::of<double>({rank + 1.0});
  world->all_reduce(sum)->wait();
  const bool world_ok = sum.item(0) == 6;
  std::printf("%s: %s (world all_reduce gave %g)\n", who.c_str(),
              world_ok ? "the world group works after the timed-out group was destroyed" : "FAILED: wrong world sum",
              sum.item(0));
  std::fflush(stdout);
  return ok && world_ok ? 0 : 1;
}
