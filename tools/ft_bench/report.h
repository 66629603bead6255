// What ft_bench reports of a run, from its event logs (event_log.h).
//
//   detection_s         kill -> the last of the first members still alive knows the step failed
//   recovery_s          kill -> the last of them has committed the killed step (redone)
//   steps_lost          steps whose work was lost: the step under way at the kill, and every
//                       step committed twice (a restart resumes from an older checkpoint)
//   steps_per_s_before  commits per second on the first surviving member before the kill
//                       (its first 2 steps left out: warm-up)
//   steps_per_s_after   the same from its first commit after the kill to its last
//   params_identical    every process that finished wrote the same parameter checksum
#pragma once

#include <string>

#include "tools/ft_bench/jobs.h"

namespace distcomm {
namespace ft_bench {

struct Metrics {
  bool ok = false;
  std::string error;
  bool killed = false;
  double detection_s = -1, recovery_s = -1;
  int64_t steps_lost = 0;
  double steps_per_s_before = 0, steps_per_s_after = 0;
  bool params_identical = false;
  int finished = 0;        // processes that wrote "end"
  bool joined = false;     // a replacement took part
  double wall_s = 0;
};

Metrics measure(const RunOutcome& run, const std::string& victim);

std::string metrics_json(const Metrics& m);
// The table: one column per run.
std::string metrics_table(const std::vector<std::pair<std::string, Metrics>>& columns);

}  // namespace ft_bench
}  // namespace distcomm
