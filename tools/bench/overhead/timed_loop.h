// The measuring loop shared by the standalone gloo program and gloo_overhead's distcomm
// side, so that both time the same thing the same way, and the one-line result they print.
// No distcomm and no gloo here: each side brings its op and its way of gathering numbers.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace distcomm {
namespace bench {

// One rank's view of a timed loop: the time of each iteration, and what the whole process
// (every thread) spent per iteration: CPU time and context switches (voluntary and not).
struct RankLoop {
  std::vector<double> times_us;
  double cpu_us_per_op = 0;
  double switches_per_op = 0;
};

// warmup untimed calls, then iters timed ones.
RankLoop time_loop(const std::function<void()>& op, int warmup, int iters);

// The numbers of one rank as doubles (times, then cpu, then switches), for an all-gather of
// equal-length buffers, and back.
std::vector<double> pack_rank_loop(const RankLoop& loop);
RankLoop unpack_rank_loop(const double* values, int iters);

// A job's result at one size: per-iteration time of the slowest rank, summarised over
// iterations; CPU and switches per op averaged over the ranks.
struct SizeResult {
  std::string impl;  // "raw_gloo", "distcomm"
  std::string op;    // "all_reduce", ...
  int nranks = 0;
  int64_t bytes = 0;  // the larger buffer of one rank (tools/bench's size column)
  int iters = 0;
  double median_us = 0;
  double mean_us = 0;
  double busbw = 0;  // GB/s (1e9 B) from the median
  double cpu_us_per_op = 0;
  double switches_per_op = 0;
};

SizeResult summarize(const std::string& impl, const std::string& op, int64_t bytes,
                     const std::vector<RankLoop>& ranks);

// nccl-tests' bus factor of the four ops compared here.
double bus_factor_of(const std::string& op, int nranks);

// "impl=raw_gloo op=all_reduce nranks=2 bytes=8 iters=200 median_us=... mean_us=... busbw=...
// cpu_us_per_op=... switches_per_op=..." and back (throws std::invalid_argument on a line
// that is not one).
std::string format_result(const SizeResult& r);
SizeResult parse_result(const std::string& line);

// The float32 count each op is called with for a requested size, as tools/bench sizes it
// (at least 1), and the size that makes (the larger buffer of one rank).
int64_t op_param_count(const std::string& op, int64_t bytes, int nranks);
int64_t op_bytes(const std::string& op, int64_t bytes, int nranks);

// "8", "64K", "1M": bytes. Throws std::invalid_argument naming flag.
int64_t parse_bytes(const std::string& text, const std::string& flag);
std::vector<int64_t> parse_byte_list(const std::string& text, const std::string& flag);

}  // namespace bench
}  // namespace distcomm
