// Under mpirun, RANK and WORLD_SIZE left over from a torchrun shell (init reads them before
// OMPI_COMM_WORLD_*). Modes:
//   agree:    they hold MPI's values: init succeeds and the world works (it was refused
//             with "must be started by an MPI launcher ... found none of
//             OMPI_COMM_WORLD_RANK" although mpirun had set it).
//   disagree: the ranks swapped: each rank's init is refused before MPI starts, naming
//             both RANK and OMPI_COMM_WORLD_RANK with their values.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "api/errors.h"
#include "api/init.h"
#include "api/tensor.h"

int main(int argc, char** argv) {
  using namespace distcomm;
  const std::string mode = argc > 1 ? argv[1] : "";
  const int rank = std::atoi(std::getenv("OMPI_COMM_WORLD_RANK"));
  const int size = std::atoi(std::getenv("OMPI_COMM_WORLD_SIZE"));
  const int claimed = mode == "agree" ? rank : size - 1 - rank;
  ::setenv("RANK", std::to_string(claimed).c_str(), 1);
  ::setenv("WORLD_SIZE", std::to_string(size).c_str(), 1);
  InitOptions o;
  o.backend = "mpi";
  o.timeout = std::chrono::seconds(20);
  try {
    ProcessGroupPtr pg = init_process_group(o);
    Tensor t = Tensor::zeros({1});
    t.fill(1);
    pg->all_reduce(t)->wait();
    std::printf("rank %d: init with RANK=%d WORLD_SIZE=%d succeeded, world sum %g\n", rank, claimed, size,
                t.item(0));
    destroy_process_group();
  } catch (const Error& e) {
    std::printf("rank %d: init with RANK=%d WORLD_SIZE=%d failed: %s\n", rank, claimed, size, e.what());
  }
  return 0;
}
