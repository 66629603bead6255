// One measured result (a size, in one of out-of-place / in-place), and how it is printed:
// the nccl-tests style table row, the footer, and one JSON object per line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace distcomm {
namespace bench {

// How the ranks' times are combined: nccl-tests' -a values, applied as nccl-tests applies
// them, to each rank's loop time (its timed calls summed, divided by the calls). nccl-tests'
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
  // The table's time, from which algbw and busbw are computed: nccl-tests' figure. Each rank
  // times its loop of `iters` calls (after a barrier), divides by iters, and the ranks' loop
  // times are combined as -a N says (the slowest rank's by default). Equal to time_loop_us.
  double time_us = 0;
  // Per iteration: each iteration's times combined across ranks (as -a N says: by default
  // the slowest rank's in that iteration), then the mean / min / median / max over the
  // iterations. A stall on one rank in one iteration and on another rank in the next counts
  // twice in time_iter_mean_us but once in time_us, so it is the larger at small sizes.
  double time_iter_mean_us = 0;
  double time_min_us = 0;
  double time_median_us = 0;
  double time_max_us = 0;
  // Each rank's timed calls summed and divided by iters, then combined across ranks (the
  // slowest rank's, or as -a N says): a loop's time per call, as raw_mpi_collectives
  // (slowest rank) and nccl-tests take it. Kept (equal to time_us) for the scripts that read
  // it. (Only the calls are summed: with --data_varying the refills between them are not.)
  double time_loop_us = 0;
  double algbw = 0;  // GB/s, GB = 1e9 bytes: bytes / time_us
  double busbw = 0;  // GB/s: algbw * the op's bus factor
  // The size asked for (-b/-e/--sizes); `bytes` may be smaller: the op's shape rounds it down
  // to whole elements (and whole per-rank chunks). -1: not known (JSON from before the field).
  int64_t requested_bytes = -1;
  int64_t wrong = -1;  // wrong elements summed over ranks; -1: not checked (-c 0)
  int iters = 0;
  std::string timing;  // "rank0", "avg", "min" or "max": how ranks' times were combined (-a)
};

struct TimingSummary {
  // nccl-tests' time (BenchRecord::time_us): each rank's mean over its iterations (its loop
  // time / iters), combined across ranks as rank_time says.
  double time_us = 0;
  // Per iteration: each iteration combined across ranks as rank_time says, then summarised
  // over the iterations (BenchRecord::time_iter_mean_us, time_min_us, ...).
  double iter_mean_us = 0;
  double min_us = 0;
  double median_us = 0;
  double max_us = 0;
};

// times_us holds nranks * iters values, rank-major (rank r's iteration i at r * iters + i).
// time_us: nccl-tests' -a N over the ranks' loop times (0 rank 0's, 1 their mean, 2 the
// min, 3 the max). The rest: each iteration's times combined across ranks the same way, then
// summarised over iterations.
TimingSummary summarize_times(const std::vector<double>& times_us, int nranks, int iters, RankTime rank_time);

// algbw and busbw in GB/s (1e9 bytes) for bytes moved in time_us.
double gigabytes_per_second(int64_t bytes, double time_us);

// The column titles: three lines, as nccl-tests prints them.
std::string table_header();
// One row: either result may be null (that form does not exist for the op): its columns
// print N/A. Ends with a newline.
std::string table_row(const BenchRecord* out_of_place, const BenchRecord* in_place);
// "# Out of bounds values : N OK|FAILED" (N: results with wrong values; "N/A" when no result
// was checked: -c 0, a barrier) and the average busbw.
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
