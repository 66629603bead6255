#include "tools/bench/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace distcomm {
namespace bench {
namespace {

constexpr double kWidth = 900, kHeight = 520;
constexpr double kLeft = 70, kRight = 230, kTop = 50, kBottom = 60;  // margins; legend on the right
const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                               "#9467bd", "#8c564b", "#e377c2", "#17becf"};

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string fixed(double v, int decimals = 1) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}

// The smallest 1, 2 or 5 times a power of ten that is >= v.
double nice_ceiling(double v) {
  if (v <= 0) return 1;
  const double power = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * power >= v * (1 - 1e-12)) return m * power;
  }
  return 10 * power;
}

}  // namespace

std::string short_size(double bytes) {
  const char* units[] = {"B", "K", "M", "G", "T"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  snprintf(buf, sizeof(buf), bytes == std::floor(bytes) ? "%.0f%s" : "%.1f%s", bytes, units[u]);
  return buf;
}

PlotSeries series_from_records(const std::vector<BenchRecord>& records, const std::string& name) {
  bool any_out_of_place = false;
  for (const BenchRecord& r : records) any_out_of_place |= !r.inplace;
  PlotSeries s;
  std::string op, backend;
  int nranks = 0;
  for (const BenchRecord& r : records) {
    if (r.inplace == any_out_of_place || r.bytes <= 0) continue;
    s.points.emplace_back(static_cast<double>(r.bytes), r.busbw);
    op = r.op;
    backend = r.backend;
    nranks = r.nranks;
  }
  std::sort(s.points.begin(), s.points.end());
  s.label = name;
  if (!op.empty()) {
    s.label += ": " + op + " " + backend + " " + std::to_string(nranks) + " ranks" +
               (any_out_of_place ? "" : " (in-place)");
  }
  return s;
}

std::string render_busbw_svg(const std::vector<PlotSeries>& series, const std::string& title) {
  double min_x = 0, max_x = 0, max_y = 0;
  bool first = true;
  for (const PlotSeries& s : series) {
    for (const auto& [bytes, busbw] : s.points) {
      const double lx = std::log2(bytes);
      min_x = first ? lx : std::min(min_x, lx);
      max_x = first ? lx : std::max(max_x, lx);
      max_y = std::max(max_y, busbw);
      first = false;
    }
  }
  if (max_x - min_x < 1) {  // one size (or none): give the axis some width
    min_x -= 1;
    max_x += 1;
  }
  const double top_y = nice_ceiling(max_y);
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  auto px = [&](double bytes) { return kLeft + (std::log2(bytes) - min_x) / (max_x - min_x) * plot_w; };
  auto py = [&](double busbw) { return kTop + plot_h - busbw / top_y * plot_h; };

  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << kHeight
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << kWidth / 2 << "\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">"
    << xml_escape(title) << "</text>\n";
  // Grid and ticks: x at powers of two (every few, at most ~12 labels), y at fifths.
  const int first_tick = static_cast<int>(std::ceil(min_x));
  const int last_tick = static_cast<int>(std::floor(max_x));
  const int stride = std::max(1, (last_tick - first_tick + 11) / 12);
  for (int t = first_tick; t <= last_tick; ++t) {
    if (t % stride != 0) continue;  // multiples of the stride, so 1K and 1M get labels when it is 2
    const double x = px(std::ldexp(1.0, t));
    o << "<line x1=\"" << fixed(x) << "\" y1=\"" << kTop << "\" x2=\"" << fixed(x) << "\" y2=\""
      << kTop + plot_h << "\" stroke=\"#ddd\"/>\n"
      << "<text x=\"" << fixed(x) << "\" y=\"" << kTop + plot_h + 16 << "\" text-anchor=\"middle\">"
      << short_size(std::ldexp(1.0, t)) << "</text>\n";
  }
  for (int i = 0; i <= 5; ++i) {
    const double v = top_y * i / 5, y = py(v);
    o << "<line x1=\"" << kLeft << "\" y1=\"" << fixed(y) << "\" x2=\"" << kLeft + plot_w << "\" y2=\""
      << fixed(y) << "\" stroke=\"#ddd\"/>\n"
      << "<text x=\"" << kLeft - 6 << "\" y=\"" << fixed(y + 4) << "\" text-anchor=\"end\">"
      << (top_y < 5 ? fixed(v, 2) : fixed(v, 1)) << "</text>\n";
  }
  o << "<rect x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << plot_w << "\" height=\"" << plot_h
    << "\" fill=\"none\" stroke=\"black\"/>\n"
    << "<text x=\"" << kLeft + plot_w / 2 << "\" y=\"" << kHeight - 18
    << "\" text-anchor=\"middle\">message size (bytes, log scale)</text>\n"
    << "<text transform=\"translate(18," << kTop + plot_h / 2
    << ") rotate(-90)\" text-anchor=\"middle\">bus bandwidth (GB/s, GB = 1e9 B)</text>\n";
  for (size_t i = 0; i < series.size(); ++i) {
    const PlotSeries& s = series[i];
    const char* color = kColors[i % (sizeof(kColors) / sizeof(kColors[0]))];
    if (!s.points.empty()) {
      o << "<polyline class=\"series\" fill=\"none\" stroke=\"" << color << "\" stroke-width=\"2\" points=\"";
      for (const auto& [bytes, busbw] : s.points) o << fixed(px(bytes)) << "," << fixed(py(busbw)) << " ";
      o << "\"/>\n";
      for (const auto& [bytes, busbw] : s.points) {
        o << "<circle cx=\"" << fixed(px(bytes)) << "\" cy=\"" << fixed(py(busbw)) << "\" r=\"3\" fill=\""
          << color << "\"><title>" << short_size(bytes) << ": " << fixed(busbw, 3) << " GB/s</title></circle>\n";
      }
    }
    const double ly = kTop + 10 + 20.0 * i, lx = kLeft + plot_w + 12;
    o << "<line x1=\"" << lx << "\" y1=\"" << ly << "\" x2=\"" << lx + 20 << "\" y2=\"" << ly
      << "\" stroke=\"" << color << "\" stroke-width=\"2\"/>\n"
      << "<text x=\"" << lx + 26 << "\" y=\"" << ly + 4 << "\">" << xml_escape(s.label) << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace bench
}  // namespace distcomm
