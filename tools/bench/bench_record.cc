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

TimingSummary summarize_times(const std::vector<double>& times_us, int nranks, int iters, bool average) {
  TimingSummary s;
  if (nranks <= 0 || iters <= 0 || times_us.size() < static_cast<size_t>(nranks) * iters) return s;
  std::vector<double> per_iter(iters);
  for (int i = 0; i < iters; ++i) {
    double combined = times_us[i];
    for (int r = 1; r < nranks; ++r) {
      const double t = times_us[static_cast<size_t>(r) * iters + i];
      combined = average ? combined + t : std::max(combined, t);
    }
    per_iter[i] = average ? combined / nranks : combined;
  }
  double sum = 0;
  for (double t : per_iter) sum += t;
  s.mean_us = sum / iters;
  for (int r = 0; r < nranks; ++r) {
    double total = 0;
    for (int i = 0; i < iters; ++i) total += times_us[static_cast<size_t>(r) * iters + i];
    const double mean = total / iters;
    s.loop_us = average ? s.loop_us + mean / nranks : std::max(s.loop_us, mean);
  }
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
  return format("# Out of bounds values : %d %s\n", failed, failed ? "FAILED" : "OK") +
         format("# Avg bus bandwidth    : %g\n#\n", avg);
}

}  // namespace bench
}  // namespace distcomm
