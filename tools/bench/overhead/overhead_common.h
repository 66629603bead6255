// What the two overhead programs share: flags, the side-by-side timing loop, the table.
//
// Each program runs the same all_reduce two ways in one job -- the library called
// directly (gloo::allreduce, MPI_Allreduce) and distcomm's ProcessGroup over the plugin
// that wraps it -- alternating blocks of iterations so that drift on a busy machine hits
// both alike, and reports the ratio of their bus bandwidths side by side.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "api/process_group.h"
#include "tools/bench/bench_record.h"

namespace distcomm {
namespace bench {

struct OverheadFlags {
  int nproc = 2;    // ranks to start (gloo program; the mpi program takes them from mpirun)
  int iters = 20;   // timed iterations per block
  int rounds = 5;   // blocks of each kind, alternating
  int warmup = 5;
  std::string algorithm = "ring";  // gloo: the algorithm both sides use
  std::vector<int64_t> sizes = {8, 64 << 10, 1 << 20, 16 << 20, 64 << 20};
};

// --nproc=N --iters=N --rounds=N --warmup=N --algorithm=NAME --sizes=8,64K,1M.
// Throws InvalidArgument naming the flag.
OverheadFlags parse_overhead_flags(const std::vector<std::string>& args);

struct OverheadRow {
  int64_t bytes = 0;
  TimingSummary direct;  // per iteration: the slowest rank's time
  TimingSummary layer;   // the same through distcomm
};

// A collective over pg: warm-up, then `rounds` alternating blocks of `iters` timed calls
// of each function (each block starts with one untimed call that lines the ranks up).
OverheadRow measure_side_by_side(ProcessGroup& pg, int64_t bytes, const OverheadFlags& flags,
                                 const std::function<void()>& direct, const std::function<void()>& layer);

// How much slower than the library distcomm may be at 8 B, in microseconds, given the
// library's own time (the caller's aim: mpi_overhead allows 2 us).
using LatencyAllowance = std::function<double(double direct_us)>;

std::string overhead_header(const std::string& title, const OverheadFlags& flags);
// One table row. Sizes from 1 MiB judge busbw (distcomm >= 95% of the library's); sizes up
// to 8 B judge latency (within the allowance); others are printed without a verdict.
std::string overhead_row(const OverheadRow& row, int nranks, const LatencyAllowance& allowance);

// The library's own float32 sum, in place over count elements, called the same way on every rank.
using DirectAllReduce = std::function<void(float* data, int64_t count)>;

// A collective over pg: for each size, the same float32 sum through `direct` and through
// pg.all_reduce, side by side; rank 0 prints the table under `title`.
void run_overhead_sweep(ProcessGroup& pg, const OverheadFlags& flags, const std::string& title,
                        const DirectAllReduce& direct, const LatencyAllowance& allowance);

// The main() of an overhead program: parses the flags and runs run_rank in every rank --
// ranks from a launcher or mpirun as they are, else --nproc ranks spawned here (refused
// when needs_mpirun). Errors go to stderr as "<name>: ..." with exit status 1.
int overhead_main(int argc, char** argv, const std::string& name, bool needs_mpirun,
                  const std::function<void(const OverheadFlags&)>& run_rank);

}  // namespace bench
}  // namespace distcomm
