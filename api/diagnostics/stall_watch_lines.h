// The words of the stall watch's own lines on stderr (not an op's error): which group it
// watches, and a look at the board that failed. Core only, not for plugins.
#pragma once

#include <string>

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

}  // namespace internal
}  // namespace distcomm
