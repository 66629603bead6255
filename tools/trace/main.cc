// trace: reading what distcomm's flight recorder and timeline wrote.
//
//   trace analyze DIR                 the ranks' dumps merged: who is behind, where, what differs
//   trace timeline FILE --svg OUT     a timeline (DISTCOMM_TIMELINE) drawn as an SVG
//
// Run it first when a job hangs: `bazel run //tools/trace -- analyze /path/to/trace_dir`.
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "api/errors.h"
#include "api/run_main.h"
#include "tools/trace/dump_analysis.h"
#include "tools/trace/timeline_svg.h"

namespace {

const char kUsage[] =
    "usage: trace analyze DIR\n"
    "       trace timeline FILE --svg OUT";

int timeline(const std::vector<std::string>& args) {
  std::string file, svg;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--svg" && i + 1 < args.size()) {
      svg = args[++i];
    } else if (args[i].rfind("--svg=", 0) == 0) {
      svg = args[i].substr(6);
    } else if (file.empty() && args[i][0] != '-') {
      file = args[i];
    } else {
      throw distcomm::InvalidArgument("timeline: unexpected argument '" + args[i] + "'\n" + kUsage);
    }
  }
  if (file.empty() || svg.empty()) throw distcomm::InvalidArgument(std::string("timeline: FILE and --svg OUT are needed\n") + kUsage);
  const distcomm::trace::JsonValue doc = distcomm::trace::parse_json_file(file);
  distcomm::trace::TimelineSummary summary;
  const std::string text = distcomm::trace::render_timeline_svg(doc, "distcomm timeline: " + file, &summary);
  std::ofstream out(svg, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out.flush()) throw distcomm::Error("timeline: cannot write " + svg);
  std::cout << "trace: " << svg << ": " << summary.ranks << " ranks, " << summary.lanes << " rows, " << summary.bars
            << " ops, " << summary.ticks << " instants\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return distcomm::run_main("trace", [&] {
    std::vector<std::string> args(argv + 1, argv + argc);
    // Under `bazel run` relative paths mean the folder bazel was run from.
    if (const char* dir = std::getenv("BUILD_WORKING_DIRECTORY")) {
      for (size_t i = 1; i < args.size(); ++i) {
        if (!args[i].empty() && args[i][0] != '/' && args[i][0] != '-') args[i] = std::string(dir) + "/" + args[i];
      }
    }
    if (args.empty()) throw distcomm::InvalidArgument(std::string("no command\n") + kUsage);
    if (args[0] == "analyze") {
      if (args.size() != 2) throw distcomm::InvalidArgument(std::string("analyze takes one folder\n") + kUsage);
      std::cout << distcomm::trace::analyze_dumps(distcomm::trace::load_dumps(args[1]));
      return 0;
    }
    if (args[0] == "timeline") return timeline({args.begin() + 1, args.end()});
    throw distcomm::InvalidArgument("unknown command '" + args[0] + "'\n" + kUsage);
  });
}
