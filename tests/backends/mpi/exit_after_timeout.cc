// After a Timeout, main returns while a peer is stuck outside MPI: the process must end
// promptly, saying on stderr that it skips MPI_Finalize (which would wait for the stuck
// peer), and mpirun then ends the job -- well before the stuck rank would have woken up.
// mpirun_test.sh --expect-failure-within / --expect-output check both.
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "api/errors.h"
#include "api/init.h"

int main() {
  distcomm::InitOptions o;
  o.backend = "mpi";
  o.timeout = std::chrono::seconds(2);
  auto pg = distcomm::init_process_group(o);
  pg->barrier()->wait();
  if (pg->rank() == 1) {
    sleep(600);  // stuck in the program, far longer than the test waits
    return 0;
  }
  distcomm::Tensor t = distcomm::Tensor::zeros({4});
  try {
    pg->all_reduce(t)->wait();
    std::printf("rank 0: all_reduce finished although rank 1 never joined\n");
    return 1;
  } catch (const distcomm::Timeout& e) {
    std::printf("rank 0: %s\n", e.what());
  }
  return 0;  // the exit handler must not wait for rank 1
}
