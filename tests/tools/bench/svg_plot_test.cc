#include "tools/bench/svg_plot.h"

#include <gtest/gtest.h>

namespace distcomm {
namespace bench {
namespace {

int occurrences(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

BenchRecord record(int64_t bytes, double busbw, bool inplace) {
  BenchRecord r;
  r.op = "all_gather";
  r.backend = "gloo";
  r.nranks = 3;
  r.bytes = bytes;
  r.busbw = busbw;
  r.inplace = inplace;
  return r;
}

TEST(SvgPlot, ShortSizes) {
  EXPECT_EQ(short_size(8), "8B");
  EXPECT_EQ(short_size(1024), "1K");
  EXPECT_EQ(short_size(64 * 1024), "64K");
  EXPECT_EQ(short_size(1 << 20), "1M");
  EXPECT_EQ(short_size(1536), "1.5K");
  EXPECT_EQ(short_size(double(int64_t{2} << 30)), "2G");
}

TEST(SvgPlot, SeriesPrefersOutOfPlaceAndSkipsEmptySizes) {
  const std::vector<BenchRecord> run = {record(4096, 2.0, true), record(4096, 1.5, false), record(0, 0, false),
                                        record(1024, 0.5, false)};
  const PlotSeries s = series_from_records(run, "a.json");
  ASSERT_EQ(s.points.size(), 2u);
  EXPECT_EQ(s.points[0], std::make_pair(1024.0, 0.5));  // sorted by size
  EXPECT_EQ(s.points[1], std::make_pair(4096.0, 1.5));
  EXPECT_EQ(s.label, "a.json: all_gather gloo 3 ranks");

  const PlotSeries only_in_place = series_from_records({record(8, 1, true)}, "b");
  EXPECT_EQ(only_in_place.points.size(), 1u);
  EXPECT_NE(only_in_place.label.find("(in-place)"), std::string::npos);
}

TEST(SvgPlot, OneLinePerSeriesOnLogAxis) {
  PlotSeries a{"gloo <run>", {{8, 0.01}, {1 << 20, 1.2}, {64 << 20, 3.4}}};
  PlotSeries b{"mpi", {{8, 0.02}, {1 << 20, 2.5}}};
  PlotSeries empty{"nothing", {}};
  const std::string svg = render_busbw_svg({a, b, empty}, "title & more");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_EQ(occurrences(svg, "class=\"series\""), 2);
  EXPECT_EQ(occurrences(svg, "<circle"), 5);
  EXPECT_NE(svg.find("gloo &lt;run&gt;"), std::string::npos);  // labels are escaped
  EXPECT_NE(svg.find("title &amp; more"), std::string::npos);
  EXPECT_NE(svg.find(">nothing<"), std::string::npos);           // still in the legend
  EXPECT_NE(svg.find(">64M<"), std::string::npos);               // x ticks are sizes
  EXPECT_NE(svg.find(">1M<"), std::string::npos);
  EXPECT_NE(svg.find(">1K<"), std::string::npos);
  EXPECT_NE(svg.find(">5.0<"), std::string::npos);               // y axis rounded up to 5 GB/s

  // Log x: 8 B, 1 MiB and 64 MiB are 17 and 6 powers of two apart.
  const size_t points = svg.find("points=\"") + 8;
  double x1, y1, x2, y2, x3, y3;
  ASSERT_EQ(sscanf(svg.c_str() + points, "%lf,%lf %lf,%lf %lf,%lf", &x1, &y1, &x2, &y2, &x3, &y3), 6);
  EXPECT_NEAR((x2 - x1) / (x3 - x2), 17.0 / 6.0, 0.01);
  EXPECT_GT(y1, y2);  // higher bandwidth is drawn higher up
  EXPECT_GT(y2, y3);
}

TEST(SvgPlot, NoPointsStillDraws) {
  const std::string svg = render_busbw_svg({}, "empty");
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_EQ(occurrences(svg, "class=\"series\""), 0);
}

}  // namespace
}  // namespace bench
}  // namespace distcomm
