// What one measuring job runs (op, algorithm, sizes, iterations), as the standalone gloo
// program and gloo_overhead take it on their command lines.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace distcomm {
namespace bench {

struct JobSpec {
  int nproc = 2;
  std::string op = "all_reduce";   // all_reduce, broadcast, all_gather, reduce_scatter
  std::string algorithm = "ring";  // all_reduce only: ring or bcube (gloo::allreduce's two)
  std::vector<int64_t> sizes = {8, 64 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20};
  int iters = 200;       // timed iterations below 1 MiB
  int large_iters = 20;  // from 1 MiB
  int warmup = 5;
};

int iterations_for(const JobSpec& spec, int64_t bytes);

// Takes --nproc= --op= --algorithm= --sizes= --iters= --large_iters= --warmup= out of args
// (what it does not know is left there for the caller). Throws std::invalid_argument
// naming the flag for a bad value.
JobSpec parse_job_spec(std::vector<std::string>& args);
// The same flags, to hand the spec to another program.
std::vector<std::string> job_spec_args(const JobSpec& spec);

}  // namespace bench
}  // namespace distcomm
