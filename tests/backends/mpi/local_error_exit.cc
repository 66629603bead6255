// One rank's program fails on its own (an out-of-range broadcast root: InvalidArgument
// before anything is sent) while the others sit in that broadcast with a 120 s timeout.
// The failing rank must not wait in MPI_Finalize for them (they never finalize: they are in
// the broadcast): it prints its error, ends without MPI_Finalize within a few seconds, and
// mpirun then ends the job -- long before the others' timeout. mpirun_test.sh
// --expect-failure-within / --expect-output check both.
#include <chrono>
#include <cstdio>

#include "api/init.h"
#include "api/run_main.h"

int main() {
  return distcomm::run_main("local_error_exit", [] {
    distcomm::InitOptions o;
    o.backend = "mpi";
    o.timeout = std::chrono::seconds(120);
    auto pg = distcomm::init_process_group(o);
    pg->barrier()->wait();
    distcomm::Tensor t = distcomm::Tensor::zeros({4});
    distcomm::BroadcastOptions b;
    b.root = pg->rank() == 1 ? pg->size() : 0;  // rank 1 alone throws InvalidArgument
    pg->broadcast(t, b)->wait();
    std::printf("rank %d: the broadcast finished although rank 1 never joined it\n", pg->rank());
    return 0;
  });
}
