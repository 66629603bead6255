// mpi_overhead: the cost of distcomm's layer over calling MPI_Allreduce directly.
//
//   mpirun -np 2 bazel-bin/tools/bench/overhead/mpi_overhead [--sizes=8,64K,1M,16M,64M]
//
// Each rank creates distcomm's world group over the mpi plugin (which initialises MPI),
// then calls the same float32 sum both ways on buffers of the same size: MPI_Allreduce on a
// duplicate of MPI_COMM_WORLD from the main thread, and ProcessGroup::all_reduce. Blocks of
// the two alternate.
#include <mpi.h>

#include <cstdio>
#include <string>
#include <vector>

#include "api/errors.h"
#include "api/init.h"
#include "tools/bench/overhead/overhead_common.h"

namespace distcomm {
namespace bench {
namespace {

void check_mpi(int rc, const char* call) {
  if (rc != MPI_SUCCESS) throw Error(std::string(call) + " failed with MPI error " + std::to_string(rc));
}

void run_rank(const OverheadFlags& flags) {
  InitOptions opts;
  opts.backend = "mpi";
  opts.timeout = std::chrono::seconds(300);
  ProcessGroupPtr pg = init_process_group(opts);

  int initialized = 0, level = 0;
  check_mpi(MPI_Initialized(&initialized), "MPI_Initialized");
  if (!initialized) throw Error("MPI is not initialised after init_process_group(backend mpi)");
  check_mpi(MPI_Query_thread(&level), "MPI_Query_thread");
  // The plugin initialised MPI on its own thread; calling MPI from this one needs MULTIPLE.
  if (level < MPI_THREAD_MULTIPLE) {
    throw Error("MPI gave thread level " + std::to_string(level) +
                ", below MPI_THREAD_MULTIPLE: this program cannot call MPI beside the plugin");
  }
  MPI_Comm comm;
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "MPI_Comm_dup");

  const std::string title = "distcomm all_reduce (mpi plugin) vs MPI_Allreduce called directly, " +
                            std::to_string(pg->size()) + " ranks, float32 sum";
  auto direct = [&](float* data, int64_t count) {
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_FLOAT, MPI_SUM, comm), "MPI_Allreduce");
  };
  // The aim at 8 B: at most 2 us more than MPI's own latency.
  run_overhead_sweep(*pg, flags, title, direct, [](double) { return 2.0; });
  MPI_Comm_free(&comm);
  pg.reset();
  destroy_process_group();
}

}  // namespace
}  // namespace bench
}  // namespace distcomm

int main(int argc, char** argv) {
  return distcomm::bench::overhead_main(argc, argv, "mpi_overhead", true, distcomm::bench::run_rank);
}
