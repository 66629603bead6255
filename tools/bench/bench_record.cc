#include "tools/bench/bench_record.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>

namespace distcomm {
namespace bench {
namespace {

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* fmt, ...) {
  char buf[512];
  va_list args;
  va_start(args, fmt);
  vsnprintf(buf, sizeof(buf), fmt, args);
  va_end(args);
  return buf;
}

// Fewer decimals as times grow, so the column stays 7 characters wide.
std::string format_time(double us) {
  if (us >= 10000.0) return format("%7.0f", us);
  if (us >= 100.0) return format("%7.1f", us);
  return format("%7.2f", us);
}

std::string result_columns(const BenchRecord* r) {
  if (r == nullptr) return format("  %7s  %6s  %6s  %6s", "N/A", "N/A", "N/A", "N/A");
  const std::string wrong = r->wrong < 0 ? "N/A" : std::to_string(r->wrong);
  return format("  %7s  %6.2f  %6.2f  %6s", format_time(r->time_us).c_str(), r->algbw, r->busbw,
                wrong.c_str());
}

}  // namespace

const char* rank_time_name(RankTime t) {
  switch (t) {
    case RankTime::kRank0: return "rank0";
    case RankTime::kAverage: return "avg";
    case RankTime::kMin: return "min";
    case RankTime::kMax: return "max";
  }
  return "max";
}

const char* rank_time_description(RankTime t) {
  switch (t) {
    case RankTime::kRank0: return "rank 0's";
    case RankTime::kAverage: return "average of the ranks'";
    case RankTime::kMin: return "fastest rank's";
    case RankTime::kMax: return "slowest rank's";
  }
  return "slowest rank's";
}

namespace {

// The ranks' values v(0) ... v(nranks - 1) combined as `how` says.
template <typename ValueOf>
double combine_ranks(RankTime how, int nranks, ValueOf v) {
  double combined = v(0);
  if (how == RankTime::kRank0) return combined;
  for (int r = 1; r < nranks; ++r) {
    const double t = v(r);
    if (how == RankTime::kAverage) combined += t;
    else if (how == RankTime::kMin) combined = std::min(combined, t);
    else combined = std::max(combined, t);
  }
  return how == RankTime::kAverage ? combined / nranks : combined;
}

}  // namespace

TimingSummary summarize_times(const std::vector<double>& times_us, int nranks, int iters, RankTime rank_time) {
  TimingSummary s;
  if (nranks <= 0 || iters <= 0 || times_us.size() < static_cast<size_t>(nranks) * iters) return s;
  std::vector<double> per_iter(iters);
  for (int i = 0; i < iters; ++i) {
    per_iter[i] = combine_ranks(rank_time, nranks, [&](int r) { return times_us[static_cast<size_t>(r) * iters + i]; });
  }
  double sum = 0;
  for (double t : per_iter) sum += t;
  s.iter_mean_us = sum / iters;
  s.time_us = combine_ranks(rank_time, nranks, [&](int r) {
    double total = 0;
    for (int i = 0; i < iters; ++i) total += times_us[static_cast<size_t>(r) * iters + i];
    return total / iters;
  });
  std::sort(per_iter.begin(), per_iter.end());
  s.min_us = per_iter.front();
  s.max_us = per_iter.back();
  s.median_us = iters % 2 ? per_iter[iters / 2] : (per_iter[iters / 2 - 1] + per_iter[iters / 2]) / 2;
  return s;
}

double gigabytes_per_second(int64_t bytes, double time_us) {
  if (time_us <= 0) return 0;
  return static_cast<double>(bytes) / 1e9 / (time_us * 1e-6);
}

std::string table_header() {
  std::string h;
  h += format("# %10s  %12s  %8s  %6s  %6s  %31s  %31s\n", "", "", "", "", "", "out-of-place    ",
              "in-place      ");
  h += format("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size", "count",
              "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
              "#wrong");
  h += format("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)", "(elements)",
              "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  return h;
}

std::string table_row(const BenchRecord* out_of_place, const BenchRecord* in_place) {
  const BenchRecord* any = out_of_place ? out_of_place : in_place;
  if (any == nullptr) return "";
  return format("%12lld  %12lld  %8s  %6s  %6d", static_cast<long long>(any->bytes),
                static_cast<long long>(any->count), any->dtype.c_str(), any->redop.c_str(), any->root) +
         result_columns(out_of_place) + result_columns(in_place) + "\n";
}

int count_failed(const std::vector<BenchRecord>& records) {
  int failed = 0;
  for (const BenchRecord& r : records) failed += r.wrong > 0 ? 1 : 0;
  return failed;
}

std::string table_footer(const std::vector<BenchRecord>& records) {
  double sum = 0;
  for (const BenchRecord& r : records) sum += r.busbw;
  const double avg = records.empty() ? 0 : sum / records.size();
  const int failed = count_failed(records);
  const bool checked = std::any_of(records.begin(), records.end(), [](const BenchRecord& r) { return r.wrong >= 0; });
  // Nothing checked (-c 0, or a barrier, which has no result): no verdict to give.
  return (checked ? format("# Out of bounds values : %d %s\n", failed, failed ? "FAILED" : "OK")
                  : std::string("# Out of bounds values : N/A (nothing checked)\n")) +
         format("# Avg bus bandwidth    : %g\n#\n", avg);
}

}  // namespace bench
}  // namespace distcomm
