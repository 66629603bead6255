// mpi without a store (mpirun alone, no init_method or InitOptions::store): an op's Timeout names the rank it
// waited for where MPI can tell, and says plainly where it cannot. Rank 0's recv from rank 1
// (which never sends) must name rank 1; its all_reduce that rank 1 has not joined cannot be
// named by MPI, so the Timeout must say that without a store the peer cannot be named and
// how to have it named. Rank 1 then stays stuck, and rank 0 exits without MPI_Finalize (its
// abandoned all_reduce never joined), as in exit_after_timeout: the job fails, as expected.
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "api/errors.h"
#include "api/init.h"
#include "api/tensor.h"
#include "tests/backends/mpi/job_markers.h"
#include "tests/backends/mpi/timeout_verdict.h"

int main() {
  using namespace distcomm;
  InitOptions o;
  o.backend = "mpi";
  o.timeout = std::chrono::seconds(20);
  ProcessGroupPtr pg = init_process_group(o);
  auto p2p = pg->new_group({0, 1});
  auto coll = pg->new_group({0, 1});
  Tensor t = Tensor::zeros({4});
  if (pg->rank() == 1) {
    if (testing::wait_for_markers("checked", {0}).empty()) return 1;
    sleep(600);  // stuck: rank 0's MPI_Finalize gives up on it, and mpirun ends the job
    return 0;
  }
  P2POptions p;
  p.timeout = std::chrono::seconds(2);
  bool ok = testing::expect_timeout(
      "rank 0", "recv from a rank that never sends", [&] { p2p->recv(t, 1, p)->wait(); },
      "rank 1 of the group has not sent it", 1.5, 10);
  AllReduceOptions a;
  a.timeout = std::chrono::seconds(2);
  ok = testing::expect_timeout("rank 0", "all_reduce a rank never joins", [&] { coll->all_reduce(t, a)->wait(); },
                               "without a store (a job launched by mpirun alone) the peer cannot be named; to have it "
                               "named, give the job a store (an init_method such as tcp://HOST:PORT",
                               1.5, 10) &&
       ok;
  testing::write_marker("checked");
  return ok ? 0 : 1;
}
