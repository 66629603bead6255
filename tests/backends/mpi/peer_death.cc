// Rank 1 dies while rank 0 waits in an all_reduce with a long timeout. With MPI, the
// launcher ends the job: mpirun must stop rank 0 and exit non-zero well before the
// op's timeout (mpirun_test.sh --expect-failure-within checks both).
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "api/init.h"

int main() {
  distcomm::InitOptions o;
  o.backend = "mpi";
  o.timeout = std::chrono::minutes(5);
  auto pg = distcomm::init_process_group(o);
  pg->barrier()->wait();
  if (pg->rank() == 1) _exit(7);  // a crash: no finalize, no goodbye
  distcomm::Tensor t = distcomm::Tensor::zeros({4});
  pg->all_reduce(t)->wait();
  std::printf("rank %d: all_reduce finished although rank 1 died\n", pg->rank());
  return 0;
}
