// The words of the stall watch's own lines on stderr (not an op's error): which group it
// watches, a look at the board that failed, and an op that has waited long. Core only, not
// for plugins.
#pragma once

#include <chrono>
#include <string>

#include "api/diagnostics/duration_text.h"

namespace distcomm {
namespace internal {

// The group an op's description names ("rank 1/4 group 'world'" of "rank 1/4 group 'world'
// all_reduce #3 ..."); `fallback` where it names none.
inline std::string group_of_description(const std::string& d, const std::string& fallback) {
  const size_t group = d.find("group '");
  const size_t end = group == std::string::npos ? group : d.find('\'', group + 7);
  return end == std::string::npos ? fallback : d.substr(0, end + 1);
}

// A tick of the watch of `group` threw `what`: what failed and what it costs. The watch
// carries on; the group's ops still end by their own timeouts.
inline std::string tick_failure_line(const std::string& group, const std::string& what) {
  return "distcomm: the stall watch of " + group + " failed in a look at the board: " + what +
         "; it carries on (this line is not repeated), but until it succeeds a mismatched or stalled op of the "
         "group may only be reported by its timeout (check this process's limits: ulimit -u, ulimit -v, memory)";
}

// What the "has waited" line says after the op's name and wait, each part where there is one.
struct LongWaitWords {
  std::string where;  // where the others are (explain_wait), or why they could not be asked
  std::string map;    // a subgroup's ranks in `where` as world ranks
  std::string note;   // the backend's own on the op's wait (work_wait_note.h): held messages
};

// "distcomm: <op> has waited 60.0 s of its timeout of 1800.0 s: <where>; <map>; <note>"
// (timeout 0: none to say).
inline std::string long_wait_line(const std::string& op, std::chrono::milliseconds waited,
                                  std::chrono::milliseconds timeout, const LongWaitWords& w) {
  std::string line = "distcomm: " + op + " has waited " + seconds_text(waited) +
                     (timeout.count() > 0 ? " of its timeout of " + seconds_text(timeout) : "");
  const char* joint = ": ";
  for (const std::string* part : {&w.where, &w.map, &w.note}) {
    if (part->empty()) continue;
    line += joint + *part;
    joint = "; ";
  }
  return line;
}

}  // namespace internal
}  // namespace distcomm
