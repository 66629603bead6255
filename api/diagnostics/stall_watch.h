// StallWatch: turns an op that can never finish into a named error, and enforces every
// op's deadline from the moment it was issued.
//
// Ranks that disagree on an op -- counts, dtype, root, reduction, a skipped collective, a
// recv larger than its send -- must never exchange bytes: a backend keeps their messages
// apart (gloo puts the op's fingerprint in its tags and slots), so the op waits instead.
// A backend tells the watch of every op it accepts (issued()); one thread per watch then:
//   - fails an op whose deadline (issue + timeout) has passed, even while it is still
//     queued behind another op, with Timeout;
//   - once an op has waited probe_after (or half its timeout, when that is shorter, but
//     at least 0.5 s), publishes this rank's ProgressReport (its
//     unfinished ops, its last collective) on the group's board (a store every rank
//     reaches), asks the other ranks for theirs, and compares them (progress_report.h),
//     again a tick later, then after gaps that double up to 16 s while the op waits
//     (each probe reads every rank's report: N waiting ranks probing every tick made
//     4 N^2 store calls a second):
//     collectives that disagree at one sequence number end in Desync on every rank, with
//     the table of what each rank runs there; a send and recv that disagree on size end in
//     InvalidArgument naming both counts; anything else is left to wait (a slow rank is
//     not an error);
//   - answers other ranks' requests with its report, every tick, even when idle;
//   - fails the group here, every tick, once another rank has published the group's failure
//     (GroupFailure::peer_has_failed): a rank that no closed connection reaches learns of
//     it within a tick, with the cause;
//   - explains a Timeout, or a connection a peer closed: which ranks are where ("ranks [1]
//     are still at all_reduce #11", "rank 2 has left the group after broadcast #1"), or a
//     Desync the reports show, for GroupFailure (explain()); a rank that does not answer and
//     whose process runs on this host (the same process_domain(), auto_backend.h: each watch
//     publishes "<domain>\n<pid>" in its first look) is named by what /proc/<pid>/stat says
//     of it: stopped (SIGSTOP, Ctrl-Z), stopped by a debugger, or ended;
//   - says on stderr, once the oldest unfinished op has waited a report interval
//     (DISTCOMM_STALL_REPORT_SECONDS, 60 s unless set) and again each time its wait has
//     doubled, how long it has waited and where the other ranks are: a rank stopped (a
//     debugger, SIGSTOP, a swapped-out host) or a program stuck between ops otherwise shows
//     nothing until the op's timeout, 30 minutes by default. Doubling bounds the lines: a
//     wait of the whole 30 minutes says so 5 times.
// The errors go through the group's GroupFailure, whose abort hooks end the stuck ops.
//
// Cost per op: one uncontended lock and a copy of the fingerprint into a ring (the last
// kTracked ops; an op pushed out of the ring while unfinished is no longer watched; the
// ring lets go of an op's Work once it and every op before it have finished). The
// thread wakes every tick (0.5 s) and makes one store request when nothing waits (reading
// the request count and the group's failure record together; the constructor makes one
// more: publishing this process).
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api/diagnostics/group_failure.h"
#include "api/diagnostics/op_fingerprint.h"
#include "api/diagnostics/progress_report.h"
#include "api/store/store.h"
#include "api/work.h"

namespace distcomm {

// How long an op waits before its first "has waited" line (DISTCOMM_STALL_REPORT_SECONDS).
inline constexpr std::chrono::milliseconds kDefaultStallReportInterval = std::chrono::seconds(60);

struct StallWatchOptions {
  int rank = 0;
  int size = 1;
  StorePtr board;  // the group's store (a backend's BackendOptions::store); required
  // How long an op waits before the ranks compare reports, and how often the thread looks.
  std::chrono::milliseconds probe_after{3000};
  // Half a second: a rank asked for its report answers within a tick, so an explanation
  // (a peer that left, a Timeout's "rank 2 has not issued #1") costs at most about that.
  std::chrono::milliseconds tick{500};
};

class StallWatch {
 public:
  static constexpr size_t kTracked = 256;

  // Starts the thread. failure: the group's; it must outlive the watch (stop() first).
  StallWatch(StallWatchOptions options, GroupFailure& failure);
  ~StallWatch();
  StallWatch(const StallWatch&) = delete;
  StallWatch& operator=(const StallWatch&) = delete;

  // An op this rank issued, its Work, and its timeout (its deadline is now + timeout).
  void issued(const OpFingerprint& fingerprint, const WorkPtr& work, std::chrono::milliseconds timeout);

  // GroupFailure's explainer, set by the constructor: for an op that failed with error (its
  // Timeout, or a peer's closed connection nobody explained), asks every rank for its
  // report (waiting about a tick) and returns a Desync or InvalidArgument the reports show,
  // else error with where the others are (progress_report.h's explain_wait), else null.
  // Null too when the board does not answer within that window and 3 s: a store whose
  // server is stopped must not hold the recording thread for the store's timeout.
  std::exception_ptr explain(const Work& op, std::exception_ptr error);

  // Ends the thread, which publishes this rank's last report ("left the group") on its
  // way out. Idempotent, and safe from several threads at once (a group aborted by its
  // caller and by a watchdog together). A thread stuck in a store call is left to end on
  // its own (it touches nothing of the group's afterwards).
  void stop();

 private:
  struct Shared;
  static void loop(std::shared_ptr<Shared> shared);
  static void watch_once(const std::shared_ptr<Shared>& shared, std::unique_lock<std::mutex>& lock);

  std::shared_ptr<Shared> shared_;
  std::mutex stop_mu_;  // one stop() at a time: the second finds the thread joined
  std::thread thread_;
};

}  // namespace distcomm
