// Which of a launcher's ranks are stopped by job control (SIGSTOP, SIGTSTP: a rank frozen
// on purpose, or by a debugger's "stop"), and since when, as the launcher sees it from
// /proc. A hung job whose cause is a stopped rank leaves dumps that only show it was late;
// the launcher's record (launcher_node<N>.json) carries what is seen here, so that
// `distcomm-trace analyze` can say the rank was stopped instead of guessing from times.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace distcomm {
namespace launch {

// Whether pid is stopped by job control: state 'T' in /proc/<pid>/stat ('t' is a
// debugger's trace stop, which the debugger ends). False when it cannot be told.
bool stopped_by_job_control(pid_t pid);

class RankStops {
 public:
  using Clock = std::chrono::steady_clock;

  // One stop of a process: first seen (wall clock ns, at most a look's interval after it
  // began) and last seen stopped.
  struct Stop {
    int64_t since_ns = 0;
    int64_t seen_ns = 0;
  };

  // Looks at each (process index, pid) in `running` -- not more often than every
  // kInterval unless `now_anyway` (the job's stop is about to continue them: the last look).
  // A process seen stopped keeps the time it was first seen so; one seen running again
  // loses it: a stop the user ended was no hang.
  void look(const std::vector<std::pair<size_t, pid_t>>& running, bool now_anyway);
  // Ends the watch: the stops kept are those seen at the last look. Called as the job's stop
  // begins, whose SIGCONT ends every stop (what the ranks do then is the stop's, not a hang).
  void freeze() { frozen_ = true; }
  bool frozen() const { return frozen_; }
  // The stop process i was in at the last look (or when frozen), if any.
  const Stop* of(size_t i) const;

  static constexpr std::chrono::milliseconds kInterval{500};

 private:
  std::map<size_t, Stop> stops_;
  Clock::time_point last_look_{};
  bool frozen_ = false;
};

}  // namespace launch
}  // namespace distcomm
