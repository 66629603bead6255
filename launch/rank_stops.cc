#include "launch/rank_stops.h"

#include <fstream>
#include <string>

#include "api/process/failure_report.h"

namespace distcomm {
namespace launch {

bool stopped_by_job_control(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  std::getline(stat, text);
  const size_t name_end = text.rfind(')');  // the name, in parentheses, may hold anything
  return name_end != std::string::npos && name_end + 2 < text.size() && text[name_end + 2] == 'T';
}

void RankStops::look(const std::vector<std::pair<size_t, pid_t>>& running, bool now_anyway) {
  if (frozen_) return;
  const Clock::time_point now = Clock::now();
  if (!now_anyway && last_look_ != Clock::time_point{} && now - last_look_ < kInterval) return;
  last_look_ = now;
  const int64_t wall = FailureReport::now_ns();
  std::map<size_t, Stop> seen;
  for (const auto& [i, pid] : running) {
    if (!stopped_by_job_control(pid)) continue;
    auto it = stops_.find(i);
    Stop s;
    s.since_ns = it != stops_.end() ? it->second.since_ns : wall;
    s.seen_ns = wall;
    seen.emplace(i, s);
  }
  stops_.swap(seen);  // the processes not seen stopped now (running again, or ended) lose theirs
}

const RankStops::Stop* RankStops::of(size_t i) const {
  auto it = stops_.find(i);
  return it == stops_.end() ? nullptr : &it->second;
}

}  // namespace launch
}  // namespace distcomm
