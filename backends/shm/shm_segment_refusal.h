// How the shm plugin words a segment that would not fit this process's file size limit when
// it is judged ahead of a group's creation (the probe, and the answer to "auto":
// shm_plugin.cc), from Segment::create's refusal for this rank's own segment
// (file_size_limit_failure, shm_segment.h). Header-only, so that a test checks it without
// the plugin.
#pragma once

#include <string>

namespace distcomm {
namespace shm {

// `over` without its "shm: " and with "this rank's segment" named as `whose`. Each part is
// changed only where it is found: were file_size_limit_failure's wording to change, the
// sentence is kept as it is, where a replace at npos threw std::out_of_range, and the answer
// to auto turned from "does not fit" into "fits" (its catch-all), bringing back the death at
// the group's creation under ulimit -f that the answer prevents.
inline std::string segment_refusal(const std::string& over, const std::string& whose) {
  const std::string prefix = "shm: ";
  std::string text = over.compare(0, prefix.size(), prefix) == 0 ? over.substr(prefix.size()) : over;
  const std::string mine = "this rank's segment";
  const size_t at = text.find(mine);
  if (at != std::string::npos) text.replace(at, mine.size(), whose);
  return text;
}

}  // namespace shm
}  // namespace distcomm
