#include "api/diagnostics/stall_watch.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <optional>

#include "api/diagnostics/board_look.h"
#include "api/diagnostics/bounded_call.h"
#include "api/diagnostics/p2p_verdict.h"
#include "api/diagnostics/peer_process.h"
#include "api/diagnostics/stall_watch_answers.h"
#include "api/diagnostics/stall_watch_lines.h"
#include "api/diagnostics/stall_watch_ring.h"
#include "api/diagnostics/timeout_window.h"
#include "api/diagnostics/work_marks.h"  // what the core keeps per Work: ordinal epochs, draining refusals, notes
#include "api/errors.h"
#include "api/group/environment.h"
#include "api/logging.h"
#include "api/process/thread_start.h"
#include "api/store/internal/call_deadline.h"

namespace distcomm {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

const char kRequestKey[] = "watch/request";
// What a rank that leaves adds to the request count (a request adds 1): the count's high
// bits say how many ranks have left, so that every waiting rank learns it within a tick
// from the call it makes anyway, and looks whether one of them left without issuing the
// collective it waits in.
constexpr int64_t kLeaveIncrement = int64_t{1} << 32;
std::string report_key(int rank) { return "watch/report/" + std::to_string(rank); }

// An op's own wait normally reports its timeout; the watch steps in later (for ops that are
// not waiting yet, or whose wait started late), by internal::deadline_slack_for(timeout).
constexpr size_t kMaxReported = 64;  // pending ops in one report
constexpr milliseconds kStopWait{2000};  // for the thread's last report when the group closes
// How long stop() waits for a thread whose look at the board has gone this long unanswered
// (the store's server stopped, or the network to it cut): then the thread is left to end on
// its own. A group aborted on a failure is stopped on the recording thread (a hierarchy
// aborts its levels so): waiting kStopWait for each of its levels' watches held an op's
// Timeout 4 s past its deadline on 2 hosts x 2 ranks whose store went silent.
constexpr milliseconds kSilentLook{1000};
// The longest gap between two probes of one stalled op (see the loop): probing again and
// again finds the same nothing, and every probe of every waiting rank reads every rank's
// report.
constexpr milliseconds kLongestProbeGap{16000};
// How much longer than its answer window (a tick and a half second, ask_everyone) an
// explanation may take for the store's own round trips, before the failure is recorded
// without it: what GroupFailure gives one board call (its kStoreAnswerWait), so that a slow
// store (a loaded machine, many ranks timing out at once) still explains, while one that
// does not answer (its server stopped) does not hold the recording thread, which may be the
// backend's progress thread, for the store's timeout.
constexpr milliseconds kExplainSlack{3000};

using internal::board_look_limit;  // how long one look at the board may take (timeout_window.h)
using internal::probe_after_for;  // and kShortestProbe (timeout_window.h)

int64_t ms_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration_cast<milliseconds>(to - from).count();
}

constexpr auto as_error = verdict_error;  // p2p_verdict.h

// Marks a look at the board (or a recording that asks it) as under way from now until the
// scope ends, however it ends: stop() does not wait long for a look that gets no answer.
struct LookUnderWay {
  std::atomic<int64_t>& since;
  explicit LookUnderWay(std::atomic<int64_t>& s) : since(s) { since.store(Clock::now().time_since_epoch().count()); }
  ~LookUnderWay() { since.store(0); }
};

}  // namespace

struct StallWatch::Shared {
  using Entry = internal::StallWatchEntry;

  StallWatchOptions options;
  milliseconds report_every = kDefaultStallReportInterval;  // DISTCOMM_STALL_REPORT_SECONDS
  // Held while failing an op, apart from mu: recording runs the explainer, which takes mu.
  std::mutex failure_mu;
  GroupFailure* failure = nullptr;  // null once stopped
  std::mutex mu;  // everything below
  std::condition_variable cv;
  std::vector<Entry> ring;
  internal::LastCollective last_collective;  // stall_watch_ring.h
  uint64_t issued_count = 0;
  uint64_t swept = 0;  // the ops before this one that finished have given their Work back

  // Lets go of the Works of the oldest ops once they have finished, up to the first that has
  // not (mu held): a finished op needs only its fingerprint here. Held until the ring came
  // round, 256 finished Works kept ~85 KiB of heap that a group's first 256 ops grew page by
  // page, one first touch (~20 us on a VM) every ~12 ops; released as they finish, the next
  // op's Work reuses the last one's memory, still in the cache. Amortised O(1) per op.
  void sweep() {
    if (issued_count - swept > ring.size()) swept = issued_count - ring.size();
    for (; swept < issued_count; ++swept) {
      Entry& e = ring[swept % ring.size()];
      if (e.work) {
        if (!e.work->is_completed()) break;
        e.work.reset();
        e.finished = true;
      }
    }
  }
  bool stopping = false;
  // The loop's own: how many ranks had left (the request count's high bits) when it last
  // read the reports, and the left ranks' last reports, which never change.
  int64_t leaves_read = 0;
  std::vector<std::optional<ProgressReport>> left_reports;
  bool exited = false;  // the thread is done
  // When the thread's current look at the board began (steady clock ns), 0 when it is not
  // looking: stop() does not wait long for a look that gets no answer.
  std::atomic<int64_t> look_since{0};
  Clock::time_point wake_at = Clock::time_point::max();  // the thread's next look
  int64_t answered = 0;  // the last request this rank answered
  // The probes of the oldest stalled op (the loop's backoff): which op, when next, and the
  // gap after that one.
  std::optional<std::pair<bool, uint64_t>> probed;  // (p2p, seq)
  Clock::time_point next_probe{};
  milliseconds probe_gap{0};
  std::string domain;  // process_domain() once published ("" until then, or unreadable)
  // Per other rank whose peer_process_key was read: its process where it runs on this host, else pid 0
  // (a published process never changes).
  std::map<int, PeerProcess> peer_pids;
  bool process_published = false;  // where this process runs is on the board (peer_process.h)

  // The report of now (mu held).
  ProgressReport report(Clock::time_point now, int64_t request) const {
    ProgressReport r;
    r.rank = options.rank;
    r.request = request;
    // Once the group is closed here, every report says so: an explainer still asking (one
    // given up on, whose store answers late) must not overwrite leave()'s last word.
    r.left = stopping;
    const uint64_t first = issued_count > ring.size() ? issued_count - ring.size() : 0;
    for (uint64_t i = first; i < issued_count; ++i) {
      const Entry& e = ring[i % ring.size()];
      if (!e.work && !e.finished) continue;
      const bool finished = e.finished || e.work->is_completed();
      if (finished || r.pending.size() >= kMaxReported) continue;
      PendingOp& p = r.pending.emplace_back();
      p.fingerprint = e.fingerprint;
      p.waiting_ms = ms_between(e.issued, now);
      // Kept by the core beside the Work (work_marks.h): a fingerprint's layout is the plugins'.
      p.ordinal_epoch = e.fingerprint.p2p ? ordinal_epoch_of(e.work.get()) : 0;
      p.refusal_draining = e.fingerprint.p2p && refusal_draining(e.work.get());  // still pairs with its send
    }
    last_collective.report(r, ring);
    return r;
  }

  // The unfinished op with this fingerprint's identity (mu held).
  WorkPtr work_of(const OpFingerprint& f) const {
    for (const Entry& e : ring) {
      if (e.work && e.fingerprint.p2p == f.p2p && e.fingerprint.seq == f.seq && !e.work->is_completed()) return e.work;
    }
    return nullptr;
  }

  const Entry* entry_of(const Work& op) const {
    for (const Entry& e : ring) {
      if (e.work.get() == &op) return &e;
    }
    return nullptr;
  }

  // Records error for work as the group's failure, unless the watch was stopped.
  void fail(const WorkPtr& work, std::exception_ptr error) {
    std::lock_guard<std::mutex> lock(failure_mu);
    if (failure && work) failure->record(std::move(error), *work);
  }

  // A rank left the group without issuing `op`, which this rank waits in: the op fails
  // naming it, unless the watch was stopped. Recorded as a lost peer named by the backend
  // is (one look at the board, for a failure that rank published before it left; no
  // explainer: its own report said where it is).
  void fail_departure(const OpFingerprint& op, const Departure& departure) {
    WorkPtr work;
    {
      std::lock_guard<std::mutex> lock(mu);
      work = work_of(op);
    }
    std::lock_guard<std::mutex> lock(failure_mu);
    if (failure && work) {
      failure->record(std::make_exception_ptr(PeerFailure(departure.message)), *work, departure.rank);
    }
  }

  // The board answered this tick's look: the group's failure reads it again, if one of its
  // reads had once been left unanswered (GroupFailure::board_answered_again).
  void board_answered(bool answered) {
    std::lock_guard<std::mutex> lock(failure_mu);
    if (failure) failure->board_answered_again(answered);
  }

  // Another rank published the group's failure (`record`, read with the request count)
  // while this rank's group is still usable: the group is gone (that rank cut its
  // connections), so it fails here too, as the cut-off oldest unfinished op, or outside an
  // op when none is in flight.
  void follow_a_failed_peer(const Store& board, const std::optional<std::string>& record) {
    std::lock_guard<std::mutex> lock(failure_mu);
    if (!failure || !failure->peer_failure_in(board, record)) return;
    WorkPtr oldest;
    {
      std::lock_guard<std::mutex> ring_lock(mu);
      const uint64_t first = issued_count > ring.size() ? issued_count - ring.size() : 0;
      for (uint64_t i = first; i < issued_count && !oldest; ++i) {
        const Entry& e = ring[i % ring.size()];
        if (e.work && !e.work->is_completed()) oldest = e.work;
      }
    }
    auto cut_off = std::make_exception_ptr(PeerFailure("another rank of the group failed and published why"));
    if (oldest) {
      failure->record(cut_off, *oldest);
    } else {
      failure->record(cut_off, "the group (no op in flight)");
    }
  }

  // Every rank's report on the board (nullopt where none), this rank's being `mine`.
  // Raises the request count, publishes this rank's report, and returns every rank's that answers it (a rank
  // that left answered already), waiting a tick at most, or `wait`; where one gives no answer in that time,
  // its answer to request accept_from (> 0: the op's early ask), which the words then say (stall_watch_answers.h).
  std::vector<std::optional<ProgressReport>> ask_everyone(milliseconds wait = milliseconds::max(), int64_t accept_from = 0);
  // GroupFailure's explainer (see there): what explained() says, given up on after the
  // answer window and kExplainSlack. `self` is this: the asking thread, if abandoned, holds it.
  static std::exception_ptr explain(const std::shared_ptr<Shared>& self, const Work& op, std::exception_ptr error);
  // Asks everyone and names where they are, against op `fingerprint`, which ended with `error`;
  // asked_before: how long before the op's deadline its early ask (accept_from) was made.
  std::exception_ptr explained(const OpFingerprint& fingerprint, const std::exception_ptr& error, milliseconds wait,
                               int64_t accept_from, milliseconds asked_before);
  // The "has waited" line of the oldest unfinished op, when it is due (mu not held);
  // board_error: why this tick's look at the board failed, when it did (then nobody is asked).
  void report_long_wait(Clock::time_point now, std::string board_error);
  // The last report, once the group is closed here (best effort; the thread's last act).
  void leave();
  // explain_wait's silent_notes for the ranks that did not report (peer_process.h; mu not held).
  std::vector<std::string> silent_notes(const std::vector<std::optional<ProgressReport>>& by_rank);

  // The reports of `ranks` (not this one) into by_rank, in one store request: every waiting
  // rank reads every rank's at each look, so N ranks cost N requests a look, not 2N^2.
  void read_reports(const std::vector<int>& ranks, std::vector<std::optional<ProgressReport>>& by_rank) const {
    std::vector<std::string> keys;
    keys.reserve(ranks.size());
    for (const int r : ranks) keys.push_back(report_key(r));
    const std::vector<std::optional<Store::Bytes>> values = read_present(*options.board, keys);
    for (size_t i = 0; i < ranks.size(); ++i) {
      by_rank[ranks[i]].reset();
      if (values[i]) by_rank[ranks[i]] = ProgressReport::decode(to_string(*values[i]));
    }
  }
  std::vector<int> other_ranks() const {
    std::vector<int> others;
    for (int r = 0; r < options.size; ++r) {
      if (r != options.rank) others.push_back(r);
    }
    return others;
  }
  // The group this watch is for, as its ops name it ("rank 1/4 group 'world'"), from the
  // latest op's description (mu held, or before the thread starts): the options carry no
  // name, and their layout is fixed by plugins built before.
  std::string group_words() const {
    const std::string fallback = "rank " + std::to_string(options.rank) + "/" + std::to_string(options.size) + "'s group";
    if (issued_count == 0) return fallback;
    const Entry& e = ring[(issued_count - 1) % ring.size()];
    return e.work ? internal::group_of_description(e.work->description(), fallback) : fallback;
  }
  // A tick of the loop threw (mu held): one line, naming the group (stall_watch_lines.h).
  void log_tick_failure(const std::exception_ptr& error) const {
    log_line_as(options.rank, options.size, internal::tick_failure_line(group_words(), message_of(error)));
  }
  std::vector<std::optional<ProgressReport>> read_reports(const ProgressReport& mine) const {
    std::vector<std::optional<ProgressReport>> by_rank(static_cast<size_t>(options.size));
    by_rank[options.rank] = mine;
    read_reports(other_ranks(), by_rank);
    return by_rank;
  }
};

StallWatch::StallWatch(StallWatchOptions options, GroupFailure& failure) : shared_(std::make_shared<Shared>()) {
  if (!options.board) throw InvalidArgument("StallWatch: needs the group's board (a store)");
  // Read here, not from the options: StallWatchOptions is built by plugins, and a field
  // added to it would change its layout under a plugin built before.
  shared_->report_every = stall_report_interval(kDefaultStallReportInterval);
  shared_->options = std::move(options);
  shared_->failure = &failure;
  failure.set_explainer(
      [shared = shared_](const Work& op, std::exception_ptr error) { return Shared::explain(shared, op, std::move(error)); });
  shared_->ring.resize(kTracked);
  // Where this process runs, before the group is handed over: a rank that dies right after
  // it is named by its process, not guessed at (else the watch's looks publish it).
  try {
    internal::StoreCallDeadline bounded(Clock::now() + kExplainSlack, "publishing where this rank's process runs");
    shared_->domain = publish_this_process(*shared_->options.board, shared_->options.rank);
    shared_->process_published = true;
  } catch (const std::exception&) {
  }
  try {
    thread_ = start_thread("the stall watch of " + shared_->group_words(), [shared = shared_] { loop(shared); });
  } catch (...) {
    failure.set_explainer(nullptr);  // no watch: nobody to explain with
    throw;
  }
}

std::vector<std::optional<ProgressReport>> StallWatch::Shared::ask_everyone(milliseconds wait, int64_t accept_from) {
  const int64_t request = options.board->add(kRequestKey, 1);
  ProgressReport mine;
  {
    std::lock_guard<std::mutex> lock(mu);
    mine = report(Clock::now(), request);
  }
  options.board->set(report_key(options.rank), mine.encode());
  // The others answer within a tick of their watch; a rank that left answered already. Not
  // past this thread's store-call deadline (an op's, in the watch's loop), less room for the
  // last reads: a rank that has not answered by then is named as such. Running into it lost
  // every answer and blamed the store ("the store's server did not answer", of a job whose
  // store was fine and one rank stopped: an outside probe).
  Clock::time_point until = Clock::now() + std::min(wait, options.tick + milliseconds(500));
  if (const std::optional<milliseconds> left = internal::StoreCallDeadline::time_left("GET")) {
    until = std::min(until, Clock::now() + *left - std::min(*left / 2, milliseconds(250)));
  }
  std::vector<std::optional<ProgressReport>> by_rank(static_cast<size_t>(options.size));
  by_rank[options.rank] = mine;
  // This request's answers, for all of the wait: an answer to the early ask alone may be from before that rank
  // issued the op ("has not issued #17" of a rank in #17 now), and stands in only where none comes.
  auto answered = [&](const std::optional<ProgressReport>& r) { return internal::answers_request(r, request); };
  // Only the ranks that have not answered are read again.
  std::vector<int> unanswered = other_ranks();
  int64_t published = request;
  for (;;) {
    read_reports(unanswered, by_rank);
    unanswered.erase(std::remove_if(unanswered.begin(), unanswered.end(), [&](int r) { return answered(by_rank[r]); }),
                     unanswered.end());
    if (unanswered.empty() || Clock::now() >= until) break;
    std::this_thread::sleep_for(milliseconds(50));
    // Ranks that ask at the same moment (every waiting rank's report comes due together)
    // answer each other from here: this watch's loop, which answers requests, is here.
    const int64_t latest = options.board->add(kRequestKey, 0);
    if (latest > published) {
      ProgressReport now;
      {
        std::lock_guard<std::mutex> lock(mu);
        now = report(Clock::now(), latest);
        this->answered = std::max(this->answered, latest);
      }
      options.board->set(report_key(options.rank), now.encode());
      published = latest;
    }
  }
  for (auto& r : by_rank) {
    // An old report: that rank did not answer (but for its early answer, said so by the words).
    if (!answered(r) && !internal::answers_early_only(r, request, accept_from)) r.reset();
  }
  return by_rank;
}

std::exception_ptr StallWatch::Shared::explain(const std::shared_ptr<Shared>& self, const Work& op,
                                              std::exception_ptr error) {
  std::optional<Shared::Entry> entry;
  {
    std::lock_guard<std::mutex> lock(self->mu);
    if (const Shared::Entry* e = self->entry_of(op)) entry = *e;
  }
  if (!entry) return nullptr;
  // A fraction of a short timeout, not a tick: the Timeout comes near its deadline (timeout_window.h).
  const milliseconds wait = internal::explain_wait_for(entry->timeout, self->options.tick + milliseconds(500));
  // Given up on as soon as another call over the same store (a sibling group's: a
  // hierarchy's level, its flat backend) has found the store silent: asking here queues
  // behind that call on the store's one connection, and waiting out the limit held a
  // hierarchical op's Timeout 4 s past its deadline when the store's server stopped.
  const StorePtr board = self->options.board;
  const milliseconds asked_before =
      std::chrono::duration_cast<milliseconds>(entry->issued + entry->timeout - entry->asked_at);
  const std::optional<std::exception_ptr> better = internal::call_with_limit_until<std::exception_ptr>(
      [self, fp = entry->fingerprint, error, wait, asked = entry->asked, asked_before] {
        return self->explained(fp, error, wait, asked, asked_before);
      },
      wait + kExplainSlack,
      [board] { return GroupFailure::store_unanswered(board); });
  return better ? *better : nullptr;
}

std::exception_ptr StallWatch::Shared::explained(const OpFingerprint& fingerprint, const std::exception_ptr& error,
                                                milliseconds wait, int64_t accept_from, milliseconds asked_before) {
  try {
    const std::vector<std::optional<ProgressReport>> by_rank = ask_everyone(wait, accept_from);
    // The op failed: whatever the reports show now is what stopped it (answers to its early
    // ask, older, give no verdict: p2p_verdict.h).
    if (std::exception_ptr named = as_error(explanation_verdict(by_rank, options.rank))) return named;
    const std::string where = explain_wait(fingerprint, by_rank, options.rank, silent_notes(by_rank));
    if (where.empty()) return nullptr;
    // Which of those words rest on an early answer alone, and from when.
    return with_detail(error, where + internal::early_answers_note(by_rank, options.rank, asked_before));
  } catch (const std::exception&) {
    return nullptr;  // the store failed: nobody can say
  }
}

void StallWatch::Shared::report_long_wait(Clock::time_point now, std::string board_error) {
  OpFingerprint fingerprint;
  std::string description, note;  // note: the backend's on this wait (work_wait_note.h)
  milliseconds waited{0};
  milliseconds timeout{0};
  {
    std::lock_guard<std::mutex> lock(mu);
    const uint64_t first = issued_count > ring.size() ? issued_count - ring.size() : 0;
    Entry* oldest = nullptr;
    for (uint64_t i = first; i < issued_count && !oldest; ++i) {
      Entry& e = ring[i % ring.size()];
      if (e.work && !e.work->is_completed()) oldest = &e;
    }
    if (!oldest || now < oldest->next_report) return;
    waited = milliseconds(ms_between(oldest->issued, now));
    // The next line when this wait has doubled: a handful of lines however long it lasts.
    oldest->next_report = oldest->issued + 2 * waited;
    fingerprint = oldest->fingerprint;
    description = oldest->work->description();
    note = wait_note_of(oldest->work.get());
    if (oldest->deadline != Clock::time_point::max()) timeout = milliseconds(ms_between(oldest->issued, oldest->deadline));
  }
  // Where the others are: their word, fresh (each answers within a tick; a stopped rank
  // does not, and is named as such). Without a board, at least that this rank still waits.
  std::string where;
  if (board_error.empty()) {
    try {
      const std::vector<std::optional<ProgressReport>> by_rank = ask_everyone();
      where = explain_wait(fingerprint, by_rank, options.rank, silent_notes(by_rank));
    } catch (const internal::StoreCallCutShort& e) {
      // Not made at all: the deadline (the op's) had come before; what used the time was
      // not the store. Said as what it is, not as a silent server.
      board_error = e.where() == internal::StoreCallCutShort::kNotMade
                        ? "no time was left before the op's deadline to ask them"
                        : internal::look_failure_text(e);
    } catch (const std::exception& e) {
      board_error = internal::look_failure_text(e);
    }
  }
  if (!board_error.empty()) where = "the others could not be asked (" + board_error + ")";
  {
    // Asking takes up to a second: an op that ended meanwhile has nothing to report, and
    // the others' word would describe what came after it.
    std::lock_guard<std::mutex> lock(mu);
    if (!work_of(fingerprint)) return;
  }
  std::string map;  // a subgroup's ranks in `where` as world ranks
  {
    std::lock_guard<std::mutex> lock(failure_mu);
    if (failure && !where.empty() && board_error.empty()) map = failure->world_ranks_note_for(where, description);
  }
  log_line(internal::long_wait_line(description.empty() ? fingerprint.describe() : description, waited, timeout,
                                    {where, map, note}));
}

StallWatch::~StallWatch() { stop(); }

void StallWatch::issued(const OpFingerprint& fingerprint, const WorkPtr& work, milliseconds timeout) {
  const Clock::time_point now = Clock::now();
  const Clock::time_point deadline = timeout.count() > 0 ? now + timeout : Clock::time_point::max();
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->sweep();
    shared_->last_collective.before_entry_reused(shared_->issued_count, shared_->ring);
    if (!fingerprint.p2p) shared_->last_collective.issued(shared_->issued_count);
    Shared::Entry& e = shared_->ring[shared_->issued_count++ % kTracked];
    internal::copy_fingerprint(e.fingerprint, fingerprint);  // into the entry's own vectors
    e.work = work;
    e.finished = false;
    e.issued = now;
    e.deadline = deadline;
    std::tie(e.timeout, e.asked) = std::make_pair(timeout.count() > 0 ? timeout : milliseconds(0), int64_t{0});
    e.next_report = now + shared_->report_every;
    // Only a deadline before the thread's next look needs it woken (rare: short timeouts).
    wake = deadline != Clock::time_point::max() && deadline + internal::deadline_slack_for(timeout) < shared_->wake_at;
    if (wake) shared_->wake_at = deadline;  // what ends the thread's wait (its predicate): a bare notify did not
  }
  if (wake) shared_->cv.notify_one();
}

void StallWatch::stop() {
  std::lock_guard<std::mutex> stopping(stop_mu_);
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->stopping = true;
  }
  {
    // Waits for a failure being recorded: bounded, as its board calls and explainer are.
    std::lock_guard<std::mutex> lock(shared_->failure_mu);
    if (shared_->failure) shared_->failure->set_explainer(nullptr);
    shared_->failure = nullptr;
  }
  shared_->cv.notify_all();
  // It publishes its last report and ends. A store call that hangs (a store whose server
  // is gone) must not hold up closing the group: then it is left to end on its own.
  bool exited = false;
  {
    std::unique_lock<std::mutex> lock(shared_->mu);
    const Clock::time_point give_up = Clock::now() + kStopWait;
    for (;;) {
      Clock::time_point until = give_up;
      const int64_t since = shared_->look_since.load();
      if (since != 0) until = std::min(until, Clock::time_point(Clock::duration(since)) + kSilentLook);
      // Looked at again every 100 ms: a look may begin after this wait did.
      until = std::min(until, Clock::now() + milliseconds(100));
      exited = shared_->cv.wait_until(lock, until, [&] { return shared_->exited; });
      if (exited) break;
      const Clock::time_point now = Clock::now();
      const int64_t looking = shared_->look_since.load();
      if (now >= give_up || (looking != 0 && now >= Clock::time_point(Clock::duration(looking)) + kSilentLook)) break;
      // Nor for a thread in a call on a store that some group of this process has found
      // silent (its last report, leave(), included): a hierarchy's level aborted on that
      // failure ends its op only once this returns.
      if (GroupFailure::store_unanswered(shared_->options.board)) break;
    }
  }
  if (exited) {
    thread_.join();
  } else {
    thread_.detach();
  }
}

void StallWatch::Shared::leave() {
  // Within the time stop() gives the thread: a board that does not answer is left alone.
  internal::StoreCallDeadline bounded(Clock::now() + kStopWait, "the stall watch's last report");
  // A look too, for stop(): it does not wait long for a report the store does not take.
  const LookUnderWay leaving(look_since);
  try {
    ProgressReport last;
    {
      std::lock_guard<std::mutex> lock(mu);
      last = report(Clock::now(), 0);
    }
    last.left = true;
    options.board->set(report_key(options.rank), last.encode());
    options.board->add(kRequestKey, kLeaveIncrement);
  } catch (...) {
    // The store is gone (or this process is out of memory): nobody will ask.
  }
}

std::exception_ptr StallWatch::explain(const Work& op, std::exception_ptr error) {
  return Shared::explain(shared_, op, std::move(error));
}

// One tick of the loop: entered and left with lock (shared->mu) held.
void StallWatch::watch_once(const std::shared_ptr<Shared>& shared, std::unique_lock<std::mutex>& lock) {
  const StallWatchOptions& o = shared->options;
  // Sleep until the next tick, or the first deadline that comes before it, or the moment
  // an op with a short timeout is due to be compared.
  // A wake by issued() (a deadline before `next`), or at a time planned for an op that has
  // finished since, only plans again and sleeps on: the board is looked at when the plan is
  // due, not at the issue of every op with a short timeout (a store request per op and rank).
  const Clock::time_point start = Clock::now();
  for (;;) {
    Clock::time_point next = start + o.tick;
    for (const auto& e : shared->ring) {
      if (e.work && e.deadline != Clock::time_point::max() && !e.work->is_completed()) {
        next = std::min(next, e.deadline + internal::deadline_slack_for(e.timeout));
        const Clock::time_point probe = e.issued + internal::first_look_after(e.timeout, o.probe_after, o.tick, e.asked == 0);
        if (probe > start) next = std::min(next, probe);
      }
      if (e.work && e.next_report > start && !e.work->is_completed()) next = std::min(next, e.next_report);
    }
    if (shared->stopping || Clock::now() >= next) break;
    shared->wake_at = next;
    shared->cv.wait_until(lock, next, [&] { return shared->stopping || shared->wake_at < next; });
  }
  if (shared->stopping) return;
  const Clock::time_point now = Clock::now();

  // An op past its deadline: the group's Timeout, whether it runs or waits its turn.
  WorkPtr late;
  milliseconds late_timeout{0};
  Clock::time_point late_deadline;  // restored where failing the late op throws
  bool probe = false, ask_early = false;  // this tick asks the others and compares; or asks only
  // An op whose timeout is short is compared sooner: at half its timeout (not before
  // kShortestProbe), so that a Desync is named before the Timeout would end it.
  milliseconds probe_after = o.probe_after;
  for (auto& e : shared->ring) {
    if (!e.work || e.deadline == Clock::time_point::max() || e.work->is_completed()) continue;
    probe_after = std::min(probe_after, probe_after_for(e.deadline - e.issued, o.probe_after));
    ask_early |= internal::take_early_ask(e.asked, now - e.issued, e.timeout, o.probe_after, o.tick);
  }
  const Shared::Entry* oldest_stalled = nullptr;
  for (auto& e : shared->ring) {
    if (!e.work || e.work->is_completed()) continue;
    if (!late && e.deadline != Clock::time_point::max() && now >= e.deadline + internal::deadline_slack_for(e.timeout)) {
      late = e.work;
      late_timeout = std::chrono::duration_cast<milliseconds>(e.deadline - e.issued);
      late_deadline = e.deadline;
      e.deadline = Clock::time_point::max();  // once: the group's failure ends it
    }
    if (now - e.issued >= probe_after && (!oldest_stalled || e.issued < oldest_stalled->issued)) oldest_stalled = &e;
  }
  // A stalled op is probed at once, then after gaps that double from a tick up to
  // kLongestProbeGap while the probes find nothing (a slow rank, not a mismatch). Every
  // probe of every waiting rank reads every rank's report: probed each tick, N waiting
  // ranks made 4 N^2 store calls a second (a checkpoint on rank 0 while 1024 ranks wait
  // in a barrier: 4 million a second on one store). A mismatch is seen at the first or
  // second probe once every rank has issued its op; one that appears later waits at most
  // a gap, and the op's Timeout asks everyone afresh anyway (explain()).
  if (oldest_stalled) {
    const std::pair<bool, uint64_t> op{oldest_stalled->fingerprint.p2p, oldest_stalled->fingerprint.seq};
    if (shared->probed != op) {
      shared->probed = op;
      shared->next_probe = now;
      shared->probe_gap = o.tick;
    }
    if (now >= shared->next_probe) {
      probe = true;
      shared->next_probe = now + shared->probe_gap;
      shared->probe_gap = std::min(2 * shared->probe_gap, kLongestProbeGap);
    }
  } else {
    shared->probed.reset();
  }
  if (late) {
    lock.unlock();
    // Recording asks the board (publish, explain): stop() does not wait long for that either.
    const LookUnderWay recording(shared->look_since);
    try {
      shared->fail(late, std::make_exception_ptr(Timeout(
                             "did not finish within its timeout of " + std::to_string(late_timeout.count()) +
                             " ms, counted from when it was issued (it may have waited behind earlier ops of the "
                             "group)")));
    } catch (...) {
      // Not failed after all (no memory, no thread for the board): the next tick tries again.
      lock.lock();
      for (auto& e : shared->ring) {
        if (e.work == late) e.deadline = late_deadline;
      }
      throw;
    }
    lock.lock();
    return;
  }

  // Answer the others' requests; when an op of this rank waits, ask and compare. The look
  // ends by the first op deadline too: this thread is what fails a late op, and a store
  // that does not answer (its server stopped) must not hold it past that deadline (it
  // did by up to 2.5 s where a group's levels share the connection, hier).
  const Clock::time_point look_limit = Clock::now() + board_look_limit(o.tick);
  Clock::time_point look_until = look_limit;
  for (const auto& e : shared->ring) {
    if (e.work && e.deadline != Clock::time_point::max() && !e.work->is_completed()) {
      look_until = std::min(look_until, e.deadline + internal::deadline_slack_for(e.timeout));
    }
  }
  const int64_t answered = shared->answered;
  lock.unlock();
  const LookUnderWay looking(shared->look_since);
  internal::StoreCallDeadline bounded(look_until, "the stall watch's look at the board");
  std::string board_error;
  try {
    if (!shared->process_published) {  // the constructor's publish failed: again in each look
      const std::string domain = publish_this_process(*o.board, o.rank);
      std::lock_guard<std::mutex> published(shared->mu);
      shared->domain = domain;
      shared->process_published = true;
    }
    // One request a tick when nothing waits; unanswered as long as the failure's own reads
    // wait, the board is silent for them too (a Timeout's explanation says so at once).
    const internal::IdleLook look = internal::read_idle_look(*o.board, kRequestKey, GroupFailure::board_key(),
                                                             kExplainSlack, [&] { shared->board_answered(false); });
    const int64_t request = probe || ask_early ? o.board->add(kRequestKey, 1) : look.requests;
    const Clock::time_point asked_at = Clock::now();
    shared->board_answered(true);
    shared->follow_a_failed_peer(*o.board, look.failure_record);
    // Once a rank has left, a collective this rank waits in may be one that rank never
    // issued: with no connection to see close (mpi), it would wait out its timeout.
    const bool someone_left = request >= kLeaveIncrement;
    if (probe || request > answered || someone_left) {
      ProgressReport mine;
      const bool answer = probe || request > answered;
      {
        std::lock_guard<std::mutex> report_lock(shared->mu);
        mine = shared->report(Clock::now(), answer ? request : answered);
        if (answer) shared->answered = request;
        for (auto& e : shared->ring) {  // answers to this request stand in for a rank that does not answer later
          if (e.asked < 0 && ask_early) std::tie(e.asked, e.asked_at) = std::make_pair(request, asked_at);
        }
      }
      if (answer) o.board->set(report_key(o.rank), mine.encode());
      const PendingOp* waiting = mine.oldest_collective();
      if (waiting && someone_left) {
        // A left report never changes: the reports are read again only when more ranks
        // have left (the count's high bits), not at every tick of every waiting rank.
        const int64_t leaves = request / kLeaveIncrement;
        if (leaves > shared->leaves_read) {
          const auto reports = shared->read_reports(mine);
          shared->left_reports.resize(reports.size());
          for (size_t r = 0; r < reports.size(); ++r) {
            if (reports[r] && reports[r]->left) shared->left_reports[r] = reports[r];
          }
          shared->leaves_read = leaves;
        }
        const std::optional<Departure> gone = departed_before(waiting->fingerprint, shared->left_reports, o.rank);
        if (gone) {
          shared->fail_departure(waiting->fingerprint, *gone);
          probe = false;
        }
      }
      if (probe && as_error(comparable_verdict(shared->read_reports(mine), o.rank, probe_after.count()))) {
        // Certain: then every rank's word, for the table.
        const auto all = shared->ask_everyone();
        Verdict v = comparable_verdict(all, o.rank, probe_after.count());
        if (v.kind == Verdict::Kind::kNone) v = comparable_verdict(shared->read_reports(mine), o.rank, probe_after.count());
        WorkPtr work;
        {
          std::lock_guard<std::mutex> work_lock(shared->mu);
          if (v.op) work = shared->work_of(*v.op);
        }
        shared->fail(work, as_error(v));
      }
    }
  } catch (const std::exception& e) {
    // The store failed: nothing to compare with now. Every op's own deadline still holds.
    board_error = internal::look_failure_text(e);
    // Ended by an op's deadline, not because the store did not answer (asking everyone
    // waits up to a tick for their reports): no "could not be asked" line for it; that op
    // fails at the top of the loop, its Timeout explained afresh.
    if (look_until < look_limit && Clock::now() >= look_until &&
        dynamic_cast<const internal::StoreCallCutShort*>(&e)) {
      lock.lock();
      return;
    }
  }
  shared->report_long_wait(Clock::now(), board_error);
  lock.lock();
}

std::vector<std::string> StallWatch::Shared::silent_notes(const std::vector<std::optional<ProgressReport>>& by_rank) {
  std::vector<bool> silent(by_rank.size());
  for (size_t r = 0; r < by_rank.size(); ++r) silent[r] = static_cast<int>(r) != options.rank && !by_rank[r];
  std::string mine;
  std::map<int, PeerProcess> pids;
  {
    std::lock_guard<std::mutex> lock(mu);
    mine = domain;
    pids = peer_pids;
  }
  std::vector<std::string> notes = silent_process_notes(*options.board, silent, mine, pids);
  std::lock_guard<std::mutex> lock(mu);
  peer_pids.insert(pids.begin(), pids.end());
  return notes;
}

void StallWatch::loop(std::shared_ptr<Shared> shared) {
  std::unique_lock<std::mutex> lock(shared->mu);
  bool told = false;  // one line, not one a tick, for a failure that repeats
  while (!shared->stopping) {
    // No exception may leave this thread (std::terminate: the process would abort without a
    // word). A tick that fails is logged and the watch carries on: it is what fails this
    // group's late ops, and its next tick may find the process's limits eased.
    try {
      watch_once(shared, lock);
    } catch (...) {
      if (!lock.owns_lock()) lock.lock();
      try {  // the line's words allocate, which may fail as the tick did (ulimit -v)
        if (!told) shared->log_tick_failure(std::current_exception());
        told = true;
      } catch (...) {
      }
    }
  }
  lock.unlock();
  shared->leave();
  lock.lock();
  shared->exited = true;
  shared->cv.notify_all();
}

}  // namespace distcomm
