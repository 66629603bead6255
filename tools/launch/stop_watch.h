// StopWatch: whether the launcher itself was stopped (SIGSTOP and SIGCONT: a debugger, a
// frozen node, a container freeze) while it ran the job. A stopped launcher that serves the
// job's store (node 0's, static jobs) answers nothing from it, so its ranks time out or take
// themselves for lost after their recovery_timeout (ft/) and exit with errors of their own:
// without this, the launcher's last line would blame the rank that exited first. Another
// machine's launcher serves no store: its line says only that it was stopped.
//
// It knows in two ways: a SIGCONT handler (async-signal-safe: it only counts, into an
// atomic), and a thread of its own that ticks every 100 ms on the monotonic clock, so that a
// tick that came seconds late is a stop (with a SIGCONT in between) or a freeze (no SIGCONT:
// a cgroup freezer, a paused VM; only gaps of kFreezeGap and more count). Each stop is said
// once, when the launcher runs again.
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace distcomm {
namespace launch {

struct LauncherStop {
  std::chrono::steady_clock::time_point began;  // the last tick before it
  std::chrono::steady_clock::time_point ended;  // the first tick after it
  bool sigcont = false;                         // a SIGCONT came in between
};

// "12 s", "3.4 s".
std::string stop_seconds_text(std::chrono::steady_clock::duration d);

// Where the job's store is, as this launcher's stop line must say it: a probe found node 1's
// launcher of a static job claiming node 0's store as its own.
enum class StoreRole {
  kServes,          // this launcher serves the job's store (node 0 of a static job)
  kNodeZeroServes,  // node 0's launcher serves it; this one is another machine's
  kRanksServe,      // rank 0 serves it (--serve_store=false, elastic rounds)
};
// launchers_serve: the job's store is served by a launcher (LaunchOptions::serve_store set).
StoreRole store_role(bool launchers_serve, int node_rank);

// "the launcher itself was stopped for 12 s (SIGSTOP/SIGCONT), and the job's store it
// serves did not answer meanwhile" (kServes), or "... and did not watch its ranks
// meanwhile" (and, with kNodeZeroServes, what node 0's store may have made of its ranks).
std::string stop_text(const LauncherStop& stop, StoreRole role);

// The stop that plausibly caused a failure the launcher saw at `failure_seen`: the longest
// of those that began before it and ended at most kAfterStop before it (a rank that timed
// out during the stop is seen as soon as the launcher runs again; its peers follow within
// seconds). nullopt when there is none. First waits (up to 1 s) for the watch thread to
// record a stop that just ended: the job may end at once when the launcher runs again.
std::optional<LauncherStop> stop_before(std::chrono::steady_clock::time_point failure_seen);

constexpr std::chrono::seconds kAfterStop{30};
// A tick this late with a SIGCONT in between is a stop; without one, kFreezeGap.
constexpr std::chrono::milliseconds kStopGap{1000};
constexpr std::chrono::milliseconds kFreezeGap{5000};

// Installs the SIGCONT handler and starts the thread (once; later calls do nothing). Each
// stop is said on stderr as "<tag>: <stop_text>" when the launcher runs again.
void start_stop_watch(const std::string& tag, StoreRole role);

}  // namespace launch
}  // namespace distcomm
