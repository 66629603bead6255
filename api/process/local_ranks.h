// The ranks of a job on this machine, started and watched together: the one loop behind
// spawn() (api), the launcher (launch/), the benchmarks' forked jobs (tools/bench) and the
// test harness (tests/testing). It forks ranks that run a function, or adopts ranks its
// caller started (the launcher execs them); it keeps one policy -- how long the ranks may
// run, what the others get once one has failed, which ranks may die of SIGKILL -- and says
// afterwards how each rank ended and which one failed first by time: in a cascade (rank 1
// fails, then rank 0 loses its connection to it) that one is the cause.
//
// Header-only, so that the launcher, which does not link the core, uses the same code.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "api/process/failure_report.h"
#include "api/process/local_processes.h"

namespace distcomm {
namespace local {

// What the other ranks get once one has failed: left alone, they would wait for the failed
// one until their own timeouts.
enum class AfterFailure {
  // SIGTERM at once, SIGKILL when the grace is over (spawn; the benchmarks, with no grace).
  kTerminate,
  // The grace to end on their own -- they usually fail fast too, and say why -- then SIGKILL
  // (the test harness, which reports every rank's failure).
  kLetEnd,
  // Nothing: the caller stops them with terminate() and kill() (the launcher first asks the
  // ranks for trace dumps, and says what it does).
  kCallerStops,
};

// Why the ranks still running were stopped.
enum class StopCause { kNone, kFailure, kTimeLimit, kCaller };

// How long spawn() and the launcher hold a stop when the first rank to fail adopted another
// rank's failure (RankWatchOptions::adopted_failure_hold). The finder exits within
// milliseconds of the ranks it cut off when it can; a finder that cannot (hung, or on
// another host) costs the others this much more before they are stopped.
constexpr std::chrono::milliseconds kAdoptedFailureHold{2000};

struct RankWatchOptions {
  // How long the ranks may run, from the first turn of watching (0: no limit). At the limit
  // the ranks still running are stopped: SIGTERM and the grace with kTerminate, SIGKILL with
  // kLetEnd (their grace after a failure ends at the limit, too). kCallerStops ignores it.
  std::chrono::milliseconds time_limit{0};
  std::chrono::milliseconds grace{0};
  AfterFailure after_failure = AfterFailure::kTerminate;
  // Ranks that may die of SIGKILL without having failed (failure tests kill one on purpose).
  std::set<int> may_be_killed;
  // When the first rank seen failing says it adopted another rank's failure
  // (FailureReport::consequence), the policy waits up to this long for a rank that failed
  // on its own before it acts (0: it acts at once). The rank that finds a failure publishes
  // it and cuts the others off before it throws, so the ranks it cut off can exit first; a
  // SIGTERM sent then could end it before it has said why, and only adopted reports would
  // be left to name the cause. The wait ends at once when such a rank exits, or when none
  // runs.
  std::chrono::milliseconds adopted_failure_hold{0};
  // Whether rank r's report says it adopted another rank's failure; by default what a
  // forked rank wrote through its pipe (fork_child). The launcher reads its ranks' files.
  std::function<bool(size_t rank)> adopted;
};

// A rank that could not be started (what() says why); the ranks started before it have
// been stopped.
struct RankStartError : std::runtime_error {
  RankStartError(int failed_rank, const std::string& why) : std::runtime_error(why), rank(failed_rank) {}
  int rank;
};

// How a forked rank failed: "it threw <type>: <message>" from the FailureReport it wrote
// (fork_child), else how it ended ("exit code 3", "signal SIGSEGV (...)", "signal SIGKILL
// (Killed) (likely the OOM killer: ...)": describe_end).
inline std::string how_it_failed(const Child& c) {
  if (auto report = FailureReport::decode(c.report)) return "it threw " + report->message;
  return describe_end(c);
}

class LocalRanks {
 public:
  using Clock = std::chrono::steady_clock;

  explicit LocalRanks(RankWatchOptions options = {}) : options_(std::move(options)) {}

  // Starts ranks 0..n-1, rank r by start(r), which returns it as a watched Child (the
  // launcher forks and execs it). When start throws, the ranks already started are stopped
  // (as after a failure, but at once unless kTerminate: they would wait for the missing
  // rank), and a std::runtime_error (fork, pipe, exec) becomes a RankStartError naming the
  // rank; anything else is rethrown as it is.
  void start(int n, const std::function<Child(int rank)>& start) {
    for (int r = 0; r < n; ++r) {
      try {
        children_.add(start(r));
      } catch (const std::runtime_error& e) {
        stop_started();
        throw RankStartError(r, e.what());
      } catch (...) {
        stop_started();
        throw;
      }
    }
  }

  // Forks ranks 0..n-1; rank r runs body(r) and exits, 0 when it returns "", else 1 with
  // what it returned, or with the FailureReport of what it threw (fork_child).
  void fork_ranks(int n, const std::function<std::string(int rank)>& body) {
    start(n, [&](int r) { return fork_child([&] { return body(r); }); });
  }

  // One more process, watched like the first ranks (a replacement for a failed rank,
  // started by the caller): it becomes index size() - 1.
  void add(Child child) { children_.add(std::move(child)); }

  size_t size() const { return children_.size(); }
  int running() const { return children_.running(); }
  const Child& operator[](size_t rank) const { return children_[rank]; }

  // One turn: sleeps up to `wait` (less when the policy has something to do sooner) until a
  // rank exits or writes, or `extra` has something to read; reaps. The first failure seen
  // before any stop is noted (first_seen_failure(); an adopted one only after its hold, see
  // adopted_failure_hold), and the policy kept: the others' grace begins, the time limit
  // stops them, SIGKILL ends the grace. Returns the ranks that exited.
  std::vector<size_t> watch_once(std::chrono::milliseconds wait, std::vector<pollfd>* extra = nullptr) {
    if (!limit_at_) {
      limit_at_ = options_.time_limit.count() > 0 ? Clock::now() + options_.time_limit : Clock::time_point::max();
    }
    if (const std::optional<Clock::time_point> due = next_due()) {
      wait = std::clamp(std::chrono::ceil<std::chrono::milliseconds>(*due - Clock::now()),
                        std::chrono::milliseconds(0), wait);
    }
    std::vector<size_t> exited = children_.poll(wait, extra);
    for (size_t r : exited) {
      if (first_seen_failure_ >= 0 || stopping() || !failed(r)) continue;
      if (options_.adopted_failure_hold.count() > 0 && adopted(r)) {
        if (held_failure_ < 0) {
          held_failure_ = static_cast<int>(r);
          held_until_ = Clock::now() + options_.adopted_failure_hold;
        }
        continue;
      }
      first_seen_failure_ = static_cast<int>(r);
      after_first_failure();
    }
    end_hold_when_due();
    keep_time();
    return exited;
  }

  // Turns until every rank has ended. The ranks' exits wake it (pidfds), not a clock.
  void watch() {
    while (running() > 0) watch_once(std::chrono::hours(1));
  }

  // Stopping, for the caller that stops the ranks itself (kCallerStops). begin_stop records
  // why (the first cause counts): failures after it are not the first seen.
  void begin_stop(StopCause why) {
    if (cause_ == StopCause::kNone) cause_ = why;
  }
  bool stopping() const { return cause_ != StopCause::kNone; }
  StopCause stop_cause() const { return cause_; }
  // SIGTERM (or `sig`: a launcher passes on the signal that stopped it) to every rank (and
  // to the process group of each that leads one, also after it exited: what it started may
  // still run there); SIGKILL is due after `grace`.
  void terminate(std::chrono::milliseconds grace, int sig = SIGTERM) {
    children_.mark_stopped();
    children_.signal(sig);
    if (!killed_) kill_at_ = Clock::now() + grace;
  }
  bool kill_due() const { return kill_at_ && Clock::now() >= *kill_at_; }
  // SIGKILL, as terminate() sends its signal; the ranks are reaped by the next turns.
  void kill() {
    children_.mark_stopped();
    children_.signal(SIGKILL);
    killed_ = true;
    kill_at_.reset();
  }
  bool killed() const { return killed_; }

  // How it went. A rank failed when it ended other than with exit code 0, unless it died of
  // SIGKILL and may_be_killed lists it. stopped (Child) says it was still running when the
  // ranks were stopped.
  bool failed(size_t rank) const {
    const Child& c = children_[rank];
    if (c.running || exited_cleanly(c.status)) return false;
    return !(WIFSIGNALED(c.status) && WTERMSIG(c.status) == SIGKILL &&
             options_.may_be_killed.count(static_cast<int>(rank)) > 0);
  }
  // The rank whose failure was seen first, before any stop (-1: none).
  int first_seen_failure() const { return first_seen_failure_; }

  // The rank that failed first by time, once every rank has ended (-1: none failed). A
  // rank's time is the one it reported (`reported`), else when its exit was seen; a rank
  // that the stop ended and that reported nothing did not fail on its own. Ranks whose
  // reports say they adopted another rank's failure (FailureReport::consequence), or
  // report the loss of a rank here that failed on its own (FailureReport::lost_rank: its
  // exit, with a code or a signal, was seen only after they noticed it), come after every
  // rank that failed on its own, whatever their times.
  int first_failure(const std::function<std::optional<FailureReport>(size_t rank)>& reported) const {
    int first = -1;
    std::pair<bool, int64_t> first_key{};  // (consequence, time): the smallest is first
    for (size_t r = 0; r < size(); ++r) {
      if (!failed(r)) continue;
      std::optional<FailureReport> report = reported(r);
      if (!report && children_[r].stopped) continue;
      const bool consequence = report && (report->consequence || lost_on_its_own(report->lost_rank, r));
      const std::pair<bool, int64_t> key =
          report ? std::make_pair(consequence, report->unix_time_ns) : std::make_pair(false, children_[r].ended_ns);
      if (first < 0 || key < first_key) {
        first = static_cast<int>(r);
        first_key = key;
      }
    }
    return first >= 0 ? first : first_seen_failure_;
  }
  // The same, with the FailureReports forked ranks wrote (fork_child).
  int first_failure() const {
    return first_failure([this](size_t r) { return FailureReport::decode(children_[r].report); });
  }

  // The job's rank that index `i` runs (Child::rank, else the index).
  int rank_of(size_t i) const { return children_[i].rank >= 0 ? children_[i].rank : static_cast<int>(i); }

  // Whether a process of the job's rank `rank` (not the reporter, index `reporter`) failed on
  // its own: it ended in failure, and not by the stop.
  bool lost_on_its_own(int rank, size_t reporter) const {
    if (rank < 0 || rank == rank_of(reporter)) return false;
    for (size_t i = 0; i < size(); ++i) {
      if (rank_of(i) == rank && failed(i) && !children_[i].stopped) return true;
    }
    return false;
  }

 private:
  // Blocks until every rank started so far has ended.
  void stop_started() {
    if (options_.after_failure == AfterFailure::kTerminate) {
      children_.stop(options_.grace);
    } else {
      children_.kill_all();
    }
  }

  bool adopted(size_t rank) const {
    if (options_.adopted) return options_.adopted(rank);
    const std::optional<FailureReport> report = FailureReport::decode(children_[rank].report);
    return report && report->consequence;
  }

  // The held (adopted) failure becomes the first seen, and the policy acts, once the hold is
  // over, no rank runs, or a stop began for another reason (then it only counts as seen).
  void end_hold_when_due() {
    if (held_failure_ < 0 || first_seen_failure_ >= 0) return;
    if (!stopping() && running() > 0 && Clock::now() < held_until_) return;
    first_seen_failure_ = held_failure_;
    if (!stopping()) after_first_failure();
  }

  void after_first_failure() {
    switch (options_.after_failure) {
      case AfterFailure::kTerminate:
        begin_stop(StopCause::kFailure);
        terminate(options_.grace);
        break;
      case AfterFailure::kLetEnd:
        // The grace counts against the time limit: it only ever brings the stop closer.
        if (Clock::now() + options_.grace < *limit_at_) {
          limit_at_ = Clock::now() + options_.grace;
          limit_cause_ = StopCause::kFailure;
        }
        break;
      case AfterFailure::kCallerStops:
        break;
    }
  }

  // When the policy acts next, if it will.
  std::optional<Clock::time_point> next_due() const {
    if (kill_at_) return kill_at_;
    const bool holding = held_failure_ >= 0 && first_seen_failure_ < 0 && !stopping();
    const bool limited = options_.after_failure != AfterFailure::kCallerStops && !stopping() &&
                         *limit_at_ != Clock::time_point::max();
    if (holding && limited) return std::min(held_until_, *limit_at_);
    if (holding) return held_until_;
    if (limited) return limit_at_;
    return std::nullopt;
  }

  void keep_time() {
    if (options_.after_failure == AfterFailure::kCallerStops || running() == 0) return;
    if (kill_due()) {
      kill();
    } else if (!stopping() && Clock::now() >= *limit_at_) {
      begin_stop(limit_cause_);
      if (options_.after_failure == AfterFailure::kTerminate) {
        terminate(options_.grace);
      } else {
        kill();
      }
    }
  }

  const RankWatchOptions options_;
  ChildSet children_;
  std::optional<Clock::time_point> limit_at_;  // set by the first turn
  StopCause limit_cause_ = StopCause::kTimeLimit;  // what reaching limit_at_ means
  StopCause cause_ = StopCause::kNone;
  std::optional<Clock::time_point> kill_at_;  // SIGKILL is due (a grace is running)
  bool killed_ = false;
  int first_seen_failure_ = -1;
  int held_failure_ = -1;  // the first failure seen, while the hold waits (adopted_failure_hold)
  Clock::time_point held_until_;
};

}  // namespace local
}  // namespace distcomm
