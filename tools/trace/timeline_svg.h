// `trace timeline FILE --svg OUT`: a timeline (api/diagnostics/timeline.h, Chrome trace events) drawn
// as one SVG for a reader without a browser at hand: a row per rank and lane (a group's
// ops, DDP's buckets), complete events as bars coloured by name (the op; a DDP bucket's
// "all_reduce" / "waited"), instant events as ticks, a time axis and a legend.
#pragma once

#include <string>

#include "tools/trace/json_value.h"

namespace distcomm {
namespace trace {

struct TimelineSummary {
  size_t ranks = 0, lanes = 0, bars = 0, ticks = 0;
};

// A complete SVG document. Throws std::runtime_error when doc is not a trace
// ({"traceEvents": [...]}) or holds no events to draw.
std::string render_timeline_svg(const JsonValue& doc, const std::string& title, TimelineSummary* summary = nullptr);

}  // namespace trace
}  // namespace distcomm
