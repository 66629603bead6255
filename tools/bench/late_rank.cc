// late_rank: what waiting for a late rank costs a job. Rank 0 comes to an all_reduce
// --late seconds after the others, which wait in it; the stall watch probes them meanwhile
// (ARCHITECTURE.md, Stall watch). Run it under the launcher and time the whole job:
//
//   bazel build //tools/launch //tools/bench:late_rank //backends:plugins
//   L=bazel-bin/tools/launch/launch B=bazel-bin/tools/bench/late_rank
//   /usr/bin/time -f "%U user %S sys %e s" $L --nproc_per_node 64 $B --late=20
//
// The user + sys seconds, less a run with --late=0, are what the ranks spent while they
// waited. Ends with one line on rank 0: the ranks, the lateness and the backend.
#include <gflags/gflags.h>

#include <chrono>
#include <thread>

#include "api/errors.h"
#include "api/init.h"
#include "api/logging.h"
#include "api/run_main.h"

DEFINE_double(late, 20.0, "seconds rank 0 comes late to the all_reduce");
DEFINE_string(backend, "gloo", "the backend (gloo, shm, mpi, auto)");

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  return distcomm::run_main("late_rank", [&] {
    if (FLAGS_late < 0) throw distcomm::InvalidArgument("--late must be >= 0, got " + gflags::GetCommandLineFlagInfoOrDie("late").current_value);
    distcomm::InitOptions init;
    init.backend = FLAGS_backend;
    distcomm::ProcessGroupPtr pg = distcomm::init_process_group(init);
    pg->barrier()->wait();
    distcomm::Tensor t = distcomm::Tensor::zeros({16});
    if (pg->rank() == 0) std::this_thread::sleep_for(std::chrono::duration<double>(FLAGS_late));
    pg->all_reduce(t)->wait();
    pg->barrier()->wait();
    distcomm::log_rank_zero("late_rank: " + std::to_string(pg->size()) + " ranks waited " +
                            gflags::GetCommandLineFlagInfoOrDie("late").current_value + " s for rank 0 over " +
                            FLAGS_backend);
    distcomm::destroy_process_group();
    return 0;
  });
}
