#include "tools/launch/stop_watch.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

namespace distcomm {
namespace launch {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kTick{100};

// Lock-free, so that the handler may touch it (async-signal-safe): it only counts.
std::atomic<uint64_t> g_sigconts{0};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "the SIGCONT handler needs a lock-free counter");

void on_sigcont(int) { g_sigconts.fetch_add(1, std::memory_order_relaxed); }

// Never destroyed: the watch thread runs until the process exits, static destructors included.
struct State {
  std::mutex mutex;
  std::vector<LauncherStop> stops;
  std::string tag;
  StoreRole role = StoreRole::kRanksServe;
};
State* const g_state = new State;
// The steady_clock time (ns) of the watch thread's latest tick, published once that tick's
// stop, if any, is recorded and said.
std::atomic<int64_t> g_checked_ns{0};

int64_t ns_of(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// A stop that ended just before the job did is still the watch thread's to record (it
// may sleep a tick more for the SIGCONT): wait until it has looked at the time after now.
void catch_up() {
  const int64_t now = ns_of(Clock::now());
  const Clock::time_point give_up = Clock::now() + 10 * kTick;
  while (g_checked_ns.load() < now && Clock::now() < give_up) std::this_thread::sleep_for(kTick / 10);
}
std::once_flag g_started;

void say(const std::string& line) {
  const std::string text = line + "\n";
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(STDERR_FILENO, text.data() + done, text.size() - done);
    if (n <= 0) return;  // a reader that went away: the line is lost, as the launcher's others are
    done += static_cast<size_t>(n);
  }
}

void watch() {
  // Signals are the launcher's main loop's (SignalWatch): this thread takes SIGCONT only.
  sigset_t all_but_sigcont;
  sigfillset(&all_but_sigcont);
  sigdelset(&all_but_sigcont, SIGCONT);
  ::pthread_sigmask(SIG_BLOCK, &all_but_sigcont, nullptr);
  sigset_t sigcont;  // blocked by the thread that started this one (start_stop_watch)
  sigemptyset(&sigcont);
  sigaddset(&sigcont, SIGCONT);
  ::pthread_sigmask(SIG_UNBLOCK, &sigcont, nullptr);
  while (true) {
    const uint64_t sigconts = g_sigconts.load();
    // Only the sleep is measured: a write() that a slow reader of stderr holds up is no stop.
    const Clock::time_point before = Clock::now();
    std::this_thread::sleep_for(kTick);
    const Clock::time_point after = Clock::now();
    const Clock::duration late = after - before - kTick;
    if (late < kStopGap) {
      g_checked_ns.store(ns_of(after));
      continue;
    }
    bool sigcont = g_sigconts.load() != sigconts;
    if (!sigcont) {
      // The SIGCONT may be handled on another thread a moment after this one runs again.
      std::this_thread::sleep_for(kTick);
      sigcont = g_sigconts.load() != sigconts;
    }
    if (sigcont || late >= kFreezeGap) {  // else a busy machine, not a stop
      const LauncherStop stop{before, after, sigcont};
      {
        std::lock_guard<std::mutex> lock(g_state->mutex);
        g_state->stops.push_back(stop);
      }
      say(g_state->tag + ": " + stop_text(stop, g_state->role));
    }
    g_checked_ns.store(ns_of(after));
  }
}

}  // namespace

std::string stop_seconds_text(Clock::duration d) {
  const double s = std::chrono::duration<double>(d).count();
  char buf[32];
  std::snprintf(buf, sizeof(buf), s < 10 ? "%.1f s" : "%.0f s", s);
  return buf;
}

StoreRole store_role(bool launchers_serve, int node_rank) {
  if (!launchers_serve) return StoreRole::kRanksServe;
  return node_rank == 0 ? StoreRole::kServes : StoreRole::kNodeZeroServes;
}

std::string stop_text(const LauncherStop& stop, StoreRole role) {
  const std::string seconds = stop_seconds_text(stop.ended - stop.began);
  std::string text = stop.sigcont ? "the launcher itself was stopped for " + seconds + " (SIGSTOP/SIGCONT)"
                                  : "the launcher itself did not run for " + seconds +
                                        " (frozen: its monotonic clock jumped that much between two ticks of a " +
                                        std::to_string(kTick.count()) + " ms watch, with no SIGCONT)";
  switch (role) {
    case StoreRole::kServes:
      return text + ", and the job's store it serves did not answer meanwhile";
    case StoreRole::kNodeZeroServes:
      // The store is node 0's and answered all along; only ranks stopped with this launcher
      // (a frozen machine stops them all) went silent there.
      return text + ", and did not watch its ranks meanwhile (if they were stopped too, the job's store on node 0 "
                    "and the other ranks may have taken them for gone)";
    case StoreRole::kRanksServe:
      break;
  }
  return text + ", and did not watch its ranks meanwhile";
}

std::optional<LauncherStop> stop_before(Clock::time_point failure_seen) {
  catch_up();
  std::lock_guard<std::mutex> lock(g_state->mutex);
  std::optional<LauncherStop> found;
  for (const LauncherStop& s : g_state->stops) {
    if (s.began > failure_seen || failure_seen > s.ended + kAfterStop) continue;
    if (!found || s.ended - s.began > found->ended - found->began) found = s;
  }
  return found;
}

void start_stop_watch(const std::string& tag, StoreRole role) {
  std::call_once(g_started, [&] {
    g_state->tag = tag;
    g_state->role = role;
    struct sigaction sa;
    std::memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_sigcont;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    ::sigaction(SIGCONT, &sa, nullptr);
    // Only the watch thread takes the handler: on another thread it would cut a poll() or
    // connect wait short with EINTR (poll is never restarted), which the launcher's links
    // take for a failed connection. Blocking SIGCONT does not keep it from continuing the
    // process. Threads started later from this one inherit the mask; ranks get theirs reset.
    sigset_t sigcont;
    sigemptyset(&sigcont);
    sigaddset(&sigcont, SIGCONT);
    ::pthread_sigmask(SIG_BLOCK, &sigcont, nullptr);
    std::thread(watch).detach();
  });
}

}  // namespace launch
}  // namespace distcomm
