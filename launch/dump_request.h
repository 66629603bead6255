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

  // Sends SIGUSR1 to each (rank, pid) (the process itself, not its group: helpers a rank
  // started may not handle the signal).
  void ask(const std::string& dir, const std::vector<std::pair<int, pid_t>>& ranks, std::chrono::milliseconds wait);
  bool pending() const { return pending_; }
  // Whether the wait is over: every rank asked has a fresh dump or is no longer running
  // (running(rank)), or the deadline has passed. Ends pending() when it says yes.
  bool finished(const std::function<bool(int rank)>& running);
  // The ranks that wrote no fresh dump (after finished()).
  const std::vector<int>& missing() const { return missing_; }
  // How long the launcher may sleep before asking finished() again.
  std::chrono::milliseconds poll_interval() const { return std::chrono::milliseconds(50); }

 private:
  bool fresh(int rank) const;

  std::string dir_;
  std::vector<int> ranks_;
  std::vector<int> missing_;
  int64_t asked_ns_ = 0;  // wall clock, as file times are
  Clock::time_point deadline_;
  bool pending_ = false;
};

}  // namespace launch
}  // namespace distcomm
