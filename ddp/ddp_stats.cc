#include "ddp/ddp_stats.h"

#include <algorithm>
#include <cstdio>

#include "ddp/message_format.h"

namespace distcomm {
namespace ddp {

double covered_length(std::vector<Interval> intervals, double clip_begin, double clip_end) {
  for (Interval& i : intervals) {
    i.begin = std::max(i.begin, clip_begin);
    i.end = std::min(i.end, clip_end);
  }
  std::sort(intervals.begin(), intervals.end(),
            [](const Interval& a, const Interval& b) { return a.begin < b.begin; });
  double total = 0;
  double reached = clip_begin;  // everything before this is already counted
  for (const Interval& i : intervals) {
    const double from = std::max(i.begin, reached);
    if (i.end > from) {
      total += i.end - from;
      reached = i.end;
    }
  }
  return total;
}

std::string IterationStats::summary() const {
  constexpr size_t kShown = 8;  // a tiny bucket cap makes hundreds of buckets
  std::string sizes;
  for (size_t i = 0; i < bucket_bytes.size() && i < kShown; ++i) {
    sizes += (i ? ", " : "") + format_bytes(static_cast<double>(bucket_bytes[i]));
  }
  if (bucket_bytes.size() > kShown) sizes += ", ... " + std::to_string(bucket_bytes.size() - kShown) + " more";
  char text[256];
  std::snprintf(text, sizeof(text),
                "; backward %.1f ms; communication %.1f ms, %.1f ms (%.0f%%) overlapped with "
                "backward; waited %.1f ms",
                backward_ms, comm_ms, overlapped_ms, 100.0 * overlap_fraction(), wait_ms);
  return "iteration " + std::to_string(iteration) + ": " + std::to_string(bucket_bytes.size()) +
         (bucket_bytes.size() == 1 ? " bucket (" : " buckets (") + sizes + "), " +
         format_bytes(static_cast<double>(bytes_reduced)) + " reduced" + text;
}

}  // namespace ddp
}  // namespace distcomm
