// Asking the surviving ranks of a stopping job for their trace dumps (api/diagnostics/trace_dump.h):
// SIGUSR1 to each rank's process, then the launcher waits until each one has written
// <trace_dir>/rank_<R>.json since it was asked, has exited, or the wait is over -- and
// only then stops them. Plain POSIX, like the rest of the launcher.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace distcomm {
namespace launch {

class DumpRequest {
 public:
  using Clock = std::chrono::steady_clock;

  // Sends SIGUSR1 to each (rank, pid) that handles it (the process itself, not its group:
  // helpers a rank started may not handle the signal). A rank that does not handle it (still
  // starting: distcomm installs its handler when the first group is made; not a distcomm
  // program; exited, not yet reaped) is not asked: SIGUSR1's default action would end it
  // ("died (signal SIGUSR1)"), and before its first group it has nothing to dump. Nor is one
  // stopped by job control (its handler cannot run). Those ranks are in not_handling().
  void ask(const std::string& dir, const std::vector<std::pair<int, pid_t>>& ranks, std::chrono::milliseconds wait);
  // Marks when this attempt's ranks began (the trace folder holding no earlier job's dumps
  // by then): a rank that wrote its dump on its own since (at its exit, after a peer's
  // failure) and exited has one, though it wrote it just before it was asked.
  void attempt_began();
  bool pending() const { return pending_; }
  // How many ranks the last ask() sent the signal to.
  size_t asked() const { return ranks_.size(); }
  // Whether the wait is over: every rank asked has a fresh dump or is no longer running
  // (running(rank)), or the deadline has passed. Ends pending() when it says yes.
  bool finished(const std::function<bool(int rank)>& running);
  // The ranks that left no dump (after finished()): those still running wrote none since
  // they were asked, those that exited none since the attempt began.
  const std::vector<int>& missing() const { return missing_; }
  // The ranks ask() left out: they did not handle SIGUSR1.
  const std::vector<int>& not_handling() const { return not_handling_; }
  // How long the launcher may sleep before asking finished() again.
  std::chrono::milliseconds poll_interval() const { return std::chrono::milliseconds(50); }

 private:
  // Whether rank's dump was written since `since_ns` (wall clock).
  bool written_since(int rank, int64_t since_ns) const;

  std::string dir_;
  std::vector<int> ranks_;
  std::vector<int> missing_;
  std::vector<int> not_handling_;
  int64_t asked_ns_ = 0;  // wall clock, as file times are
  int64_t began_ns_ = 0;  // attempt_began(); 0 before: any dump in the folder counts
  Clock::time_point deadline_;
  bool pending_ = false;
};

}  // namespace launch
}  // namespace distcomm
