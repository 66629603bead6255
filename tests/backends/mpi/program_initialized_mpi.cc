// A program that initialises MPI itself (MPI_THREAD_MULTIPLE) and then uses the mpi backend:
// the plugin starts its runtime on the MPI that is there (its own duplicate of
// MPI_COMM_WORLD for group creation included), runs ops and subgroups, and leaves
// MPI_Finalize to the program.
#include <chrono>
#include <cstdio>

#include "api/init.h"

#if __has_include(<mpi.h>)
#define OMPI_SKIP_MPICXX 1  // the C API only
#include <mpi.h>

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int ok = 1;
  {
    distcomm::InitOptions o;
    o.backend = "mpi";
    o.timeout = std::chrono::seconds(60);
    distcomm::ProcessGroupPtr pg = distcomm::init_process_group(o);
    distcomm::Tensor t = distcomm::Tensor::of({1.0f, 1.0f, 1.0f, 1.0f});
    pg->all_reduce(t)->wait();
    ok = ok && t.data_as<float>()[0] == static_cast<float>(pg->size());
    distcomm::ProcessGroupPtr pair = pg->new_group({0, pg->size() - 1});
    if (pair) {
      distcomm::Tensor u = distcomm::Tensor::of({1.0f, 1.0f, 1.0f, 1.0f});
      pair->all_reduce(u)->wait();
      ok = ok && u.data_as<float>()[0] == static_cast<float>(pair->size());
    }
    // The program's own MPI traffic still works next to distcomm's.
    int one = 1, sum = 0;
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    ok = ok && sum == pg->size();
    std::printf("rank %d: %s\n", pg->rank(), ok ? "program-initialized MPI works" : "FAILED: wrong values");
    distcomm::destroy_process_group();
  }
  MPI_Finalize();
  return ok ? 0 : 1;
}
#else
// Built without Open MPI: mpirun_test skips before running it.
int main() { return 1; }
#endif
