// trace: reading what distcomm's flight recorder and timeline wrote. Installed as
// distcomm-trace; its usage names it as it was run.
//
//   trace analyze DIR [DIR...]        the ranks' dumps merged: who is behind, where, what differs
//                                     (several folders: one per machine, read as one job)
//   trace timeline FILE --svg OUT     a timeline (DISTCOMM_TIMELINE) drawn as an SVG
//   trace --help | --version
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
#include "api/version.h"
#include "tools/trace/dump_analysis.h"
#include "tools/trace/timeline_svg.h"

namespace {

// Usage errors exit 2, as tools/launch's and bench's do; a failure to read or write (a
// missing folder, a dump that is not JSON) exits 1 through run_main.
constexpr int kExitUsage = 2;

// A command line that cannot be run: its message, then the usage, exit status 2.
struct UsageError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// The usage in the name the program was run as: "trace" under bazel-bin, "distcomm-trace"
// installed (a fixed "trace" told the installed copy's user of a command they do not have).
std::string usage(const std::string& program) {
  return "usage: " + program + " analyze DIR [DIR...]        the ranks' flight-recorder dumps merged: who is "
         "behind, where, what differs (a job's folder on each machine: all of them)\n"
         "       " + program + " timeline FILE --svg OUT     a timeline (DISTCOMM_TIMELINE) drawn as an SVG\n"
         "       " + program + " --help | --version";
}

std::string program_name(const char* argv0) {
  const std::string path = argv0 && *argv0 ? argv0 : "trace";
  return path.substr(path.rfind('/') + 1);
}

// What the command line asks for, checked before anything is read.
struct Command {
  std::string name;  // "analyze" or "timeline"
  std::string path;  // timeline's FILE
  std::string svg;   // timeline's OUT
  std::vector<std::string> dirs;  // analyze's folders
};

Command parse_timeline(const std::vector<std::string>& args) {
  Command c{"timeline", "", "", {}};
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--svg" && i + 1 < args.size()) {
      c.svg = args[++i];
    } else if (args[i].rfind("--svg=", 0) == 0) {
      c.svg = args[i].substr(6);
    } else if (c.path.empty() && !args[i].empty() && args[i][0] != '-') {
      c.path = args[i];
    } else {
      throw UsageError("timeline: unexpected argument '" + args[i] + "'");
    }
  }
  if (c.path.empty() || c.svg.empty()) throw UsageError("timeline: FILE and --svg OUT are needed");
  return c;
}

Command parse_command(const std::vector<std::string>& args) {
  if (args.empty()) throw UsageError("no command");
  if (args[0] == "analyze") {
    // A job over several machines writes a folder on each: all of them are one job's.
    if (args.size() < 2) throw UsageError("analyze takes one or more folders");
    Command c{"analyze", "", "", {}};
    for (size_t i = 1; i < args.size(); ++i) {
      if (args[i].empty() || args[i][0] == '-') throw UsageError("analyze: unexpected argument '" + args[i] + "'");
      c.dirs.push_back(args[i]);
    }
    return c;
  }
  if (args[0] == "timeline") return parse_timeline(args);
  throw UsageError("unknown command '" + args[0] + "'");
}

int timeline(const Command& c) {
  const distcomm::trace::JsonValue doc = distcomm::trace::parse_json_file(c.path);
  distcomm::trace::TimelineSummary summary;
  const std::string text = distcomm::trace::render_timeline_svg(doc, "distcomm timeline: " + c.path, &summary);
  std::ofstream out(c.svg, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out.flush()) throw distcomm::Error("timeline: cannot write " + c.svg);
  std::cout << "trace: " << c.svg << ": " << summary.ranks << " ranks, " << summary.lanes << " rows, "
            << summary.bars << " ops, " << summary.ticks << " instants\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string program = program_name(argv[0]);
  std::vector<std::string> args(argv + 1, argv + argc);
  // Anywhere on the line (`trace timeline --help` asks too), as launch and bench take them.
  for (const std::string& arg : args) {
    if (arg == "--help" || arg == "-help" || arg == "-h") {
      std::cout << usage(program) << "\n";
      return 0;
    }
    if (arg == "--version" || arg == "-version") {
      std::cout << "trace (distcomm) " << DISTCOMM_VERSION << "\n";
      return 0;
    }
  }
  // Under `bazel run` relative paths mean the folder bazel was run from.
  if (const char* dir = std::getenv("BUILD_WORKING_DIRECTORY")) {
    for (size_t i = 1; i < args.size(); ++i) {
      if (!args[i].empty() && args[i][0] != '/' && args[i][0] != '-') args[i] = std::string(dir) + "/" + args[i];
    }
  }
  Command command;
  try {
    command = parse_command(args);
  } catch (const UsageError& e) {
    std::cerr << "trace: " << e.what() << "\n" << usage(program) << "\n";
    return kExitUsage;
  }
  return distcomm::run_main("trace", [&] {
    if (command.name == "analyze") {
      // A file that cannot be read is named in the report, the rest analysed; exit status 0
      // all the same (the report is what was asked for), with a warning on stderr for
      // whoever reads only that. Nothing readable at all exits 1.
      const distcomm::trace::DumpFolder folder = distcomm::trace::load_dump_folders(command.dirs);
      std::cout << distcomm::trace::analyze_folder(folder);
      const size_t bad = folder.unreadable.size();
      if (bad > 0) {
        std::cerr << "trace: warning: " << bad << (bad == 1 ? " file" : " files")
                  << " unreadable, left out (named above)\n";
      }
      return 0;
    }
    return timeline(command);
  });
}
