// The picture: bus bandwidth against message size (log scale), one line per series,
// written as SVG by hand so it needs no plotting package.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tools/bench/bench_record.h"

namespace distcomm {
namespace bench {

struct PlotSeries {
  std::string label;
  std::vector<std::pair<double, double>> points;  // (bytes, busbw GB/s), increasing bytes
};

// One series from a run's records: its out-of-place results (in-place when the op has
// none), sizes of 0 bytes left out. The label is `name` plus op, backend and rank count.
PlotSeries series_from_records(const std::vector<BenchRecord>& records, const std::string& name);

// A complete SVG document. Series without points are listed in the legend only.
std::string render_busbw_svg(const std::vector<PlotSeries>& series, const std::string& title);

// "8B", "64K", "1M", "2G": binary multiples, for axis labels.
std::string short_size(double bytes);

}  // namespace bench
}  // namespace distcomm
