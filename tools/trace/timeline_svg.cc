#include "tools/trace/timeline_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>
#include <vector>

namespace distcomm {
namespace trace {
namespace {

constexpr double kWidth = 1200, kLabelWidth = 190, kRowHeight = 26, kTop = 46, kRightMargin = 20;
const char* const kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f", v);
  return buf;
}

// The colour key of an event: its op ("all_reduce"), or for DDP's "bucket 3 all_reduce" the
// last word, so that every bucket's reduction shares a colour.
std::string colour_key(const std::string& name) {
  if (name.rfind("bucket ", 0) == 0) return "bucket " + name.substr(name.rfind(' ') + 1);
  return name;
}

std::string duration_text(double us) {
  char buf[32];
  if (us >= 1e6) std::snprintf(buf, sizeof(buf), "%.3g s", us / 1e6);
  else if (us >= 1e3) std::snprintf(buf, sizeof(buf), "%.3g ms", us / 1e3);
  else std::snprintf(buf, sizeof(buf), "%.3g us", us);
  return buf;
}

struct Event {
  int64_t pid, tid;
  std::string name;
  double ts, dur;
  bool instant;
};

}  // namespace

std::string render_timeline_svg(const JsonValue& doc, const std::string& title, TimelineSummary* summary) {
  const JsonValue& events = doc["traceEvents"];
  if (!doc.is_object() || events.type != JsonValue::Type::kArray) {
    throw std::runtime_error("not a Chrome trace: no \"traceEvents\" array");
  }
  std::map<std::pair<int64_t, int64_t>, std::string> lane_names;
  std::vector<Event> drawn;
  std::map<std::pair<int64_t, std::string>, size_t> begins;  // an async span's begin, by (pid, id)
  for (const JsonValue& e : events.items) {
    const std::string ph = e.str("ph");
    if (ph == "M" && e.str("name") == "thread_name") {
      lane_names[{e.integer("pid"), e.integer("tid")}] = e["args"].str("name");
    } else if (ph == "X" || ph == "i" || ph == "I") {
      drawn.push_back({e.integer("pid"), e.integer("tid"), e.str("name"), e.real("ts"), e.real("dur"), ph != "X"});
    } else if (ph == "b") {
      begins[{e.integer("pid"), e.str("id") + e["id"].text}] = drawn.size();
      drawn.push_back({e.integer("pid"), e.integer("tid"), e.str("name"), e.real("ts"), 0, false});
    } else if (ph == "e") {
      auto it = begins.find({e.integer("pid"), e.str("id") + e["id"].text});
      if (it != begins.end()) drawn[it->second].dur = e.real("ts") - drawn[it->second].ts;
    }
  }
  if (drawn.empty()) throw std::runtime_error("the trace has no events to draw");

  // Rows: by rank, then lane name.
  std::map<std::tuple<int64_t, std::string, int64_t>, int> rows;
  for (const Event& e : drawn) {
    auto it = lane_names.find({e.pid, e.tid});
    rows.emplace(std::make_tuple(e.pid, it == lane_names.end() ? std::to_string(e.tid) : it->second, e.tid), 0);
  }
  std::map<std::pair<int64_t, int64_t>, int> row_of;
  int index = 0;
  for (auto& [key, row] : rows) {
    row = index++;
    row_of[{std::get<0>(key), std::get<2>(key)}] = row;
  }
  double t0 = drawn[0].ts, t1 = drawn[0].ts + drawn[0].dur;
  std::map<std::string, std::string> colours;
  std::set<int64_t> ranks;
  for (const Event& e : drawn) {
    t0 = std::min(t0, e.ts);
    t1 = std::max(t1, e.ts + e.dur);
    ranks.insert(e.pid);
    const std::string key = colour_key(e.name);
    if (!colours.count(key)) colours[key] = kPalette[colours.size() % (sizeof(kPalette) / sizeof(kPalette[0]))];
  }
  const double span = std::max(t1 - t0, 1.0);
  const double plot_width = kWidth - kLabelWidth - kRightMargin;
  const double legend_top = kTop + rows.size() * kRowHeight + 34;
  const double height = legend_top + 20 * std::ceil(colours.size() / 4.0) + 16;
  auto x_of = [&](double ts) { return kLabelWidth + (ts - t0) / span * plot_width; };

  std::string svg = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
                    num(kWidth) + "\" height=\"" + num(height) + "\" viewBox=\"0 0 " + num(kWidth) + " " +
                    num(height) + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg += "<rect x=\"0\" y=\"0\" width=\"" + num(kWidth) + "\" height=\"" + num(height) + "\" fill=\"white\"/>\n";
  svg += "<text x=\"10\" y=\"20\" font-size=\"15\" font-weight=\"bold\">" + escape(title) + "</text>\n";
  svg += "<text x=\"10\" y=\"38\" fill=\"#555\">" + std::to_string(ranks.size()) + " ranks, " +
         std::to_string(drawn.size()) + " events over " + duration_text(span) + "</text>\n";
  for (const auto& [key, row] : rows) {
    const double y = kTop + row * kRowHeight;
    if (row % 2 == 0) {
      svg += "<rect x=\"0\" y=\"" + num(y) + "\" width=\"" + num(kWidth) + "\" height=\"" + num(kRowHeight) +
             "\" fill=\"#f3f3f3\"/>\n";
    }
    svg += "<text x=\"8\" y=\"" + num(y + 17) + "\">rank " + std::to_string(std::get<0>(key)) + " " +
           escape(std::get<1>(key)) + "</text>\n";
  }
  for (const Event& e : drawn) {
    const double y = kTop + row_of[{e.pid, e.tid}] * kRowHeight;
    const std::string& colour = colours[colour_key(e.name)];
    if (e.instant) {
      const double x = x_of(e.ts);
      svg += "<line x1=\"" + num(x) + "\" y1=\"" + num(y + 2) + "\" x2=\"" + num(x) + "\" y2=\"" + num(y + kRowHeight - 2) +
             "\" stroke=\"" + colour + "\" stroke-width=\"2\"><title>" + escape(e.name) + "</title></line>\n";
    } else {
      const double w = std::max(e.dur / span * plot_width, 1.0);  // every op stays visible
      svg += "<rect x=\"" + num(x_of(e.ts)) + "\" y=\"" + num(y + 4) + "\" width=\"" + num(w) + "\" height=\"" +
             num(kRowHeight - 8) + "\" fill=\"" + colour + "\"><title>" + escape(e.name) + " " +
             duration_text(e.dur) + "</title></rect>\n";
    }
  }
  // Axis: the span in five steps.
  const double axis_y = kTop + rows.size() * kRowHeight + 4;
  svg += "<line x1=\"" + num(kLabelWidth) + "\" y1=\"" + num(axis_y) + "\" x2=\"" + num(kLabelWidth + plot_width) +
         "\" y2=\"" + num(axis_y) + "\" stroke=\"black\"/>\n";
  for (int i = 0; i <= 5; ++i) {
    const double x = kLabelWidth + plot_width * i / 5;
    svg += "<line x1=\"" + num(x) + "\" y1=\"" + num(axis_y) + "\" x2=\"" + num(x) + "\" y2=\"" + num(axis_y + 5) +
           "\" stroke=\"black\"/>\n<text x=\"" + num(x) + "\" y=\"" + num(axis_y + 18) + "\" text-anchor=\"middle\">" +
           duration_text(span * i / 5) + "</text>\n";
  }
  int k = 0;
  for (const auto& [key, colour] : colours) {
    const double x = 10 + (k % 4) * 290, y = legend_top + (k / 4) * 20;
    svg += "<rect x=\"" + num(x) + "\" y=\"" + num(y - 10) + "\" width=\"14\" height=\"12\" fill=\"" + colour +
           "\"/>\n<text x=\"" + num(x + 20) + "\" y=\"" + num(y) + "\">" + escape(key) + "</text>\n";
    ++k;
  }
  svg += "</svg>\n";
  if (summary) {
    summary->ranks = ranks.size();
    summary->lanes = rows.size();
    for (const Event& e : drawn) (e.instant ? summary->ticks : summary->bars)++;
  }
  return svg;
}

}  // namespace trace
}  // namespace distcomm
