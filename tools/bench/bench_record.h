// One measured result (a size, in one of out-of-place / in-place), and how it is printed:
// the nccl-tests style table row, the footer, and one JSON object per line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace distcomm {
namespace bench {

// How each iteration's times are combined across ranks: nccl-tests' -a values. nccl-tests'
// default is kAverage (1); bench's is kMax (3), which its published figures use.
enum class RankTime { kRank0 = 0, kAverage = 1, kMin = 2, kMax = 3 };

// "rank0", "avg", "min", "max": the JSON's timing field.
const char* rank_time_name(RankTime t);
// The "# time:" header's words: "rank 0's", "average of the ranks'", "fastest rank's",
// "slowest rank's".
const char* rank_time_description(RankTime t);

struct BenchRecord {
  std::string op;       // "all_reduce"
  std::string backend;  // "gloo"
  int64_t bytes = 0;    // the size column: the larger buffer of one rank
  int64_t count = 0;    // elements the op is called with per rank
  std::string dtype;    // "float32"
  std::string redop;    // "sum", or "none" for ops that do not reduce
  int root = -1;        // -1 for ops without a root
  int nranks = 0;
  bool inplace = false;
  // Per-iteration times are first combined across ranks (the slowest rank's, or as -a N
  // says); time_us is the mean over iterations of that, min/median/max its spread.
  double time_us = 0;
  double time_min_us = 0;
  double time_median_us = 0;
  double time_max_us = 0;
  // Each rank's timed calls summed and divided by iters, then combined across ranks (the
  // slowest rank's, or as -a N says): a loop's time per call, as raw_mpi_collectives
  // (slowest rank) and nccl-tests (average by default) take it, so the figure to hold
  // against theirs. A stall on one rank in one iteration and on the other rank in another
  // counts twice in time_us (each iteration's slowest) but once here. (Only the calls are
  // summed: with --data_varying the refills between them are not in it.)
  double time_loop_us = 0;
  double algbw = 0;  // GB/s, GB = 1e9 bytes: bytes / time
  double busbw = 0;  // GB/s: algbw * the op's bus factor
  int64_t wrong = -1;  // wrong elements summed over ranks; -1: not checked (-c 0)
  int iters = 0;
  std::string timing;  // "rank0", "avg", "min" or "max": how ranks' times were combined (-a)
};

struct TimingSummary {
  double mean_us = 0;
  double min_us = 0;
  double median_us = 0;
  double max_us = 0;
  double loop_us = 0;  // BenchRecord::time_loop_us
};

// times_us holds nranks * iters values, rank-major (rank r's iteration i at r * iters + i).
// Each iteration's times are combined across ranks as rank_time says (rank 0's, the mean,
// the min or the max), then summarised over iterations; loop_us combines each rank's mean
// instead.
TimingSummary summarize_times(const std::vector<double>& times_us, int nranks, int iters, RankTime rank_time);

// algbw and busbw in GB/s (1e9 bytes) for bytes moved in time_us.
double gigabytes_per_second(int64_t bytes, double time_us);

// The column titles: three lines, as nccl-tests prints them.
std::string table_header();
// One row: either result may be null (that form does not exist for the op): its columns
// print N/A. Ends with a newline.
std::string table_row(const BenchRecord* out_of_place, const BenchRecord* in_place);
// "# Out of bounds values : N OK|FAILED" (N: results with wrong values) and the average busbw.
std::string table_footer(const std::vector<BenchRecord>& records);
// Results that had wrong values (the N of the footer).
int count_failed(const std::vector<BenchRecord>& records);

// One JSON object, no newline.
std::string to_json(const BenchRecord& r);
// Parses the output of to_json, one object per line (blank lines skipped). Throws
// InvalidArgument naming `source` and the line for malformed input.
std::vector<BenchRecord> records_from_json_lines(const std::string& text, const std::string& source);

}  // namespace bench
}  // namespace distcomm
