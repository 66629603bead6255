// What ft_bench reports of a run, from its event logs (event_log.h). The times are about
// the first kill (the earliest "kill" line); "the first members still alive" are those of
// rank0..rank<n-1> that are no victim of any kill.
//
//   detection_s         kill -> the last of the first members still alive knows the step failed
//   recovery_s          kill -> the last of them has committed the killed step (redone)
//   steps_lost          steps whose work was lost, the most any of them lost: in-process, every
//                       step it saw aborted; the restart path, the step under way at the kill
//                       and every step committed twice (it resumes from an older checkpoint)
//   steps_per_s_before  commits per second on the first surviving member before the kill
//                       (its first 2 steps left out: warm-up)
//   steps_per_s_after   the same from its first commit after the kill to its last
//   params_identical    every process that finished wrote the same parameter checksum
//   params_identical_every_step
//                       for every committed step, every process that committed it wrote the
//                       same checksum after it (a replacement's first step included)
//   members_final       the processes that finished (wrote "end"), by id
//   steps_committed     the steps they had committed at the end (-1 if they differ)
//   every_step_committed  each of them committed every step from its first (0, or the one it
//                       joined at) to the end, and none after
//   joined_step         the step a replacement first took part in (-1: none did)
//   joined_state_identical  every replacement received the members' parameters: what
//                       begin_step gave it equals their checksum after the step before
//   refused_joiner      the joiner with another state, if one was started: refused as expected
//                       (and while the others still trained)?
#pragma once

#include <string>
#include <vector>

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
  bool params_identical_every_step = false;
  std::string first_difference;  // the first step whose checksums differ, and whose
  int finished = 0;        // processes that wrote "end"
  std::vector<std::string> members_final;
  int64_t steps_committed = -1;
  bool every_step_committed = false;
  std::string missed;      // the first process and step that breaks every_step_committed
  bool joined = false;     // a replacement took part
  int64_t joined_step = -1;
  bool joined_state_identical = false;
  int kills = 0;           // "kill" lines
  bool refused_started = false, refused_as_expected = false;
  bool refused_during_training = false;  // it ended before the job's last commit
  std::string refused_exit, refused_message;
  double wall_s = 0;
  std::string log_dir;     // the run's event logs
};

// victims: every member that was to die (the kills' and the one killed in recovery).
Metrics measure(const RunOutcome& run, const std::vector<std::string>& victims);
// Whether the run did all it should: ok, identical parameters at the end and after every
// step, every step committed by each finisher.
bool run_passed(const Metrics& m);

std::string metrics_json(const Metrics& m);
// The table: one column per run.
std::string metrics_table(const std::vector<std::pair<std::string, Metrics>>& columns);

}  // namespace ft_bench
}  // namespace distcomm
