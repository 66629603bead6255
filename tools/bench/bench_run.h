// The measuring loop of one rank: for each size and each form (out-of-place, in-place),
// warm up, time every iteration, combine the times across ranks, check the results and
// count wrong elements across ranks.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "api/process_group.h"
#include "tools/bench/bench_flags.h"
#include "tools/bench/bench_record.h"

namespace distcomm {
namespace bench {

// Every rank's per-iteration times, rank-major (rank r's at r * mine.size()), gathered
// through pg itself, as nccl-tests gathers its timings through MPI. A collective. With
// cuda_device >= 0 the times travel through that device (a group that serves only CUDA
// tensors, nccl, has no backend for host ones).
std::vector<double> gather_times(ProcessGroup& pg, std::vector<double> mine, int cuda_device = -1);

// The lines above the table: what ran, on what, and how it was timed.
std::string run_description(const BenchFlags& flags, const std::string& backend, int nranks);

// A collective over pg (every rank calls it with the same flags). Rank 0 writes the header,
// one row per size as soon as it is measured, and the footer to `out`. Returns the records
// (the same on every rank).
std::vector<BenchRecord> run_sweep(ProcessGroup& pg, const BenchFlags& flags, FILE* out);

}  // namespace bench
}  // namespace distcomm
