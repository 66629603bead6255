// GroupFailure: "this group has failed", written once for every backend.
//
// After its first failure a group is unusable: a started collective cannot be cancelled
// (MPI), a communicator must be aborted (NCCL), connections are closed (gloo), and the
// ranks' op sequences no longer match. So a backend does the same things on a failure, and
// does them here:
//   1. record the first failure -- its kind (the error's type), this rank, the op and its
//      sequence number, the culprit rank when known, the time -- and keep it;
//   2. refuse every later op at once, with an error of the same type that quotes the first;
//   3. where the group's ranks share a store, publish the first failure there, and explain
//      an op that a peer cut off (PeerFailure) with what that peer published, so that every
//      rank reports the cause (another rank's Timeout or Desync) and names its rank, rather
//      than the consequence ("connection closed"); a rank whose own failure finds another
//      rank's record already there (both found the same Desync; a Timeout after a peer
//      failed) reports that first one too;
//   4. then, once the record is stored (or the store has not answered for seconds), run
//      the backend's abort hooks once (cut connections, abort communicators), so that
//      neither a local thread nor a peer stays blocked on the group. In this order a peer
//      that sees the connection closed finds the record with its first read.
// A shutdown by this rank (ProcessGroup::abort or destruction) also makes the group
// unusable, with its own refusal; the peers are told when ops were in flight.
//
// Thread-safe. failed() is one atomic load, cheap enough for every op's issue path.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/store/store.h"
#include "api/work.h"

namespace distcomm {

// The words by which an op's error says that another rank's failure cut it off (an adopted
// failure): "rank 2 of the group timed out and aborted the group, which cut this op off".
// tools/trace reads them in dumps, to tell such an error from a rank's own.
constexpr char kCutThisOpOff[] = "which cut this op off";

// The words of a record a rank leaves on a group's board when the group is destroyed while an
// exception propagates on that thread (its program is failing: the group went out of scope
// during the unwinding, before run_main could publish the error, ProcessGroup's destructor):
// "rank 0/2 group 'world/g0': rank 0 left the group while its program was failing with an
// exception". Its peers would otherwise take the close for an orderly leave. Until
// ProcessGroup::publish_program_failure completes it with the error, the message ends with
// kErrorNotReportedYet; a peer that adopts such a record waits a moment for the completed one.
constexpr char kLeftWhileFailing[] = "left the group while its program was failing with an exception";
constexpr char kErrorNotReportedYet[] = " (its error was not reported yet)";

struct FailureRecord {
  // Appended only: the number is what a record published in the store carries.
  enum class Kind { kTimeout, kPeerFailure, kShutDown, kOther, kDesync, kInvalidArgument };
  Kind kind = Kind::kOther;
  int rank = -1;     // the group rank that recorded it
  int culprit = -1;  // the rank held responsible; -1 when unknown
  std::string op;    // "all_reduce"; "" when the failure was not an op's
  int64_t seq = -1;  // the op's sequence number; -1 when none
  std::string message;  // what went wrong, with the op's description in front
  std::chrono::system_clock::time_point time;

  // One line of text per field (the message last), as published in the store.
  std::string encode() const;
  static std::optional<FailureRecord> decode(const std::string& text);
  // The kind of an error: its type (Timeout, PeerFailure, Desync, InvalidArgument), else kOther.
  static Kind kind_of(const std::exception_ptr& error);
};

class GroupFailure {
 public:
  // rank: this rank in the group. board: a store every rank of the group reaches (the
  // backend's BackendOptions::store), or null: failures are then not published.
  GroupFailure(int rank, StorePtr board);
  ~GroupFailure();
  GroupFailure(const GroupFailure&) = delete;
  GroupFailure& operator=(const GroupFailure&) = delete;

  // world_ranks[group rank] = world rank (BackendOptions::global_ranks). In a subgroup,
  // where the two differ, a failure that blames one lost peer then also gives its world
  // rank ("...; rank 1 of this group is world rank 3"), and a peer's failure names that
  // peer "rank 2 (world rank 5) of the group": a reader of a subgroup's error would
  // otherwise take "rank 1" for world rank 1 (as often as not the rank reporting) and read
  // the wrong process's log. Call it before any op; a plugin calls name_world_ranks below
  // instead. Kept outside the object (group_failure.cc), so that GroupFailure's layout stays
  // what plugins built before were compiled with.
  void set_world_ranks(std::vector<int> world_ranks);

  // Run once, in the order added, by the thread that records the first failure (and by a
  // shutdown with ops in flight). They must not block on peers, nor wait for a thread that
  // runs Work callbacks: a callback may abort the group, and the recording thread may hold
  // what that abort takes (the stall watch's failure lock). Add them before any op.
  void on_abort(std::function<void()> hook);
  // Asked when an op's own Timeout, or a PeerFailure no peer has explained, is about to
  // become the group's first failure (before the abort hooks, while the other peers are
  // still connected): returns the error to record instead -- the same one with where the
  // other ranks are ("ranks [1] are still at all_reduce #11"), or what the ranks' reports
  // show (a Desync). May wait a little for the peers to say (stall_watch.h), never for
  // long: it runs on the recording thread, which may be the backend's progress thread with
  // the group's ops held, so it bounds its own store calls (the stall watch's gives up after
  // its answer window and a store call's 3 s, diagnostics/bounded_call.h) and returns null
  // when the board did not answer in time. Not asked once the board has not answered one
  // of GroupFailure's own calls in time.
  using Explainer = std::function<std::exception_ptr(const Work& op, std::exception_ptr error)>;
  void set_explainer(Explainer explainer);
  // Whether a call on `board`'s store (the store a PrefixStore board ends at) by some
  // GroupFailure of this process ran out of time, and no look at it has been answered
  // since: the store's server stopped answering. An explainer asking over that store gives
  // up once this says so, rather than waiting out its own limit.
  static bool store_unanswered(const StorePtr& board);

  // For a wrapper whose GroupFailure is over the same board as the backend it wraps (the
  // hierarchy's over its flat gloo backend's, which watches every connection): `hook` runs
  // when another GroupFailure of this process over that board records its first failure,
  // on the recording thread, after that one's abort hooks, with the error and the culprit
  // (-1 when unknown); never after this GroupFailure is destroyed. It must not block, nor
  // stop the backend that records (the thread may be one of that backend's own). Once.
  // Each group's backend has a board object of its own (a PrefixStore), so only a wrapper
  // and the backend it wraps share one.
  using SiblingFailed = std::function<void(std::exception_ptr error, int culprit)>;
  void on_sibling_failure(SiblingFailed hook);
  // No hook runs after this returns (one under way is waited for): for an owner whose
  // destructor tears down what its hook uses before this GroupFailure goes.
  void stop_following();
  struct Follower;  // the process's list of them is group_failure.cc's

  // Failed or shut down: later ops must be refused.
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  // What an op issued now must end with: null while the group is usable, else an error of
  // the first failure's type that quotes it ("the group is unusable since an earlier
  // failure; ...") or the shutdown's refusal.
  std::exception_ptr refusal() const;
  // Throws refusal() if there is one.
  void check_usable() const;

  // The op `op` failed with `error` (a distcomm error; others become Error). Returns what
  // the op must end with: the error itself for the group's first failure (or, for a
  // PeerFailure, what the peer that caused it published), also when the op whose failure
  // came first is recorded again (a watch recorded it, then the op's own wait failed);
  // refusal() for a failure that follows an earlier one. The first failure is recorded and published, then the abort
  // hooks run. culprit: the rank held responsible, when the backend knows it. For a
  // PeerFailure it means the backend saw that rank's connection close: then the board is
  // read once (a rank that fails publishes before it cuts its connections) and the
  // explainer is not asked (the rank may be dead); a record of another rank that blames
  // the same culprit for the same kind of loss leaves this rank's own error as it is.
  std::exception_ptr record(std::exception_ptr error, const Work& op, int culprit = -1);
  // record() for a PeerFailure because `culprit` closed the group cleanly while `op` still
  // needed it (gloo's goodbye): that rank published nothing, so nothing is waited for on the
  // board; the explainer is asked (where the ranks are, or the Desync that let the rank
  // finish and leave) when the board answers one read in time -- its host may be the rank
  // that left.
  std::exception_ptr record_departure(std::exception_ptr error, const Work& op, int culprit);
  // The same for a failure outside an op (setup, a background check); where: what failed.
  std::exception_ptr record(std::exception_ptr error, const std::string& where, int culprit = -1);
  // record() for peers a watch saw go outside any op's own wait (gloo's connection watch):
  // when this rank is already recording a failure (reading the board, asking the
  // explainer), that failure was seen first -- the peer may have exited because of it --
  // so this waits for it and returns its refusal. op: the op in flight, or null.
  std::exception_ptr record_loss(std::exception_ptr error, const Work* op, int culprit);

  // This rank stops the group: later ops end with `refusal` (unless the group had failed
  // before: its failure stays the answer). ops_in_flight is asked after the group is
  // marked; when it says yes, the peers are told (published) and the abort hooks run.
  void shut_down(std::exception_ptr refusal, const std::function<bool()>& ops_in_flight = {});

  // The first failure or shutdown, if any.
  std::optional<FailureRecord> first() const;
  // The record some rank of the group has published on the board, if any: one read, within
  // answer_wait (nullopt too when the board does not answer). How a group built over other
  // groups (the hierarchy, api/hierarchical_backend.h) learns whom an inner group's failure
  // blames, in that group's ranks.
  std::optional<FailureRecord> published(std::chrono::milliseconds answer_wait) const;

  // Leaves each record on its board (a backend's store, the one a GroupFailure of the
  // group reads) unless another record is there already, waiting a few seconds at most in
  // all (an exiting process with many groups over a store that does not answer waited that
  // long for each): the boards of each underlying store in the order given, the stores at
  // once. How a failure no backend saw (the program's own error,
  // ProcessGroup::publish_program_failure) reaches the peers' GroupFailures.
  static void publish_records(const std::vector<std::pair<StorePtr, FailureRecord>>& records);
  // Replaces each board's record by `completed` where the board still holds `pending` (and
  // only then: a record some other failure left stays), within a few seconds in all: how
  // publish_program_failure completes the records of the groups destroyed while the error
  // propagated (kLeftWhileFailing).
  struct Completion {
    StorePtr board;
    FailureRecord pending;
    FailureRecord completed;
  };
  static void complete_records(const std::vector<Completion>& completions);
  // The record published on `board`, if any: one plain read (the caller bounds its waits),
  // for what waits on the group's ranks outside its ops (the host exchange).
  static std::optional<FailureRecord> read_record(Store& board);

  // Whether this group is still usable here while another rank has published the group's
  // failure (one read of the board, bounded). A rank that no closed connection reaches (a
  // recv from any rank, which gloo does not fail when one of the pairs closes; a rank with
  // nothing in flight) learns of the failure this way: the stall watch asks every tick, and
  // records a PeerFailure, which the published record then explains.
  bool peer_has_failed() const;

  // Of `group_ranks` (peers this rank lost), those that their launcher marked in the job's
  // store as stopped because another rank failed (api/process/launcher_stop.h: tools/launch
  // stops a failed rank's machine-mates), each with the launcher's why ("rank 9 failed
  // (...)"). One read of the board's store, within a short wait; none when it does not
  // answer, when the group's ranks are its own (not the job's), or with no board. Plugins
  // call it through launcher_stops() below. launcher_stops.cc.
  std::vector<std::pair<int, std::string>> stopped_by_launcher(const std::vector<int>& group_ranks) const;

 private:
  std::exception_ptr record_failure(std::exception_ptr error, const std::string& where, const Work* op,
                                    int culprit, bool departure = false, bool loss = false);
  // A PeerFailure may be a peer's failure seen from here: its published record, if any,
  // looked for during `window` when the first read finds none.
  std::optional<FailureRecord> look_up_cause(std::chrono::milliseconds window, std::chrono::milliseconds answer_wait) const;
  // A cause that says its rank left while its program was failing, error not reported yet
  // (kErrorNotReportedYet): the completed record, when that rank publishes it within a
  // moment; else the cause as it is.
  FailureRecord completed_cause(FailureRecord cause) const;
  // The board's record as text ("" when there is none); nullopt without a board, or when it
  // does not answer.
  // answer_wait: how long a store call may take before the board is taken as gone.
  std::optional<std::string> read_board(std::chrono::milliseconds answer_wait) const;
  // Leaves the record on the board unless another is there; returns that other rank's
  // record when one got there first (nullopt: this one is stored, or there is no board).
  std::optional<FailureRecord> publish(const FailureRecord& record, std::chrono::milliseconds answer_wait) const;
  // fn (a call on the board) on its own thread, waited for a few seconds at most; nullopt
  // when it failed or ran out of time (then the board is taken as gone).
  template <typename R>
  std::optional<R> ask_board(std::function<R()> fn, std::chrono::milliseconds answer_wait) const;
  void run_abort_hooks();
  // This board, or another over the same store (a sibling group's), left a call unanswered
  // in time and no look has been answered since.
  bool board_silent() const;
  // Tells the followers over this board (on_sibling_failure) of this first failure.
  void tell_followers(std::exception_ptr error, int culprit) const;

  // " (world rank N)" for a group rank whose world rank differs; "" otherwise.
  std::string world_rank_text(int group_rank) const;
  // The world rank of `group_rank`: itself where no map was set (the world group, whose
  // global_ranks are empty), -1 where the map does not hold it.
  int world_rank_of(int group_rank) const;
  // "group 'world/g0' ranks [0, 1] are world ranks [3, 5]" when `words` name a rank by
  // number ("rank 1", "ranks [1, 2]") and this group's ranks are not the world's; else "".
  // `where`: an op's description, which names the group. A failure that may name several
  // ranks (a Timeout's where-the-others-are, a Desync's table) gets it appended when
  // recorded; the stall watch's log lines too (the core's own: not an entry point for
  // plugins, hence private).
  std::string world_ranks_note_for(const std::string& words, const std::string& where) const;
  // The board's store answered a call made by someone else (the stall watch's look at the
  // same store): a read that once got no answer in time (board_gone_) no longer stops the
  // next ones. A server stopped for a while (a debugger on rank 0) would otherwise leave the
  // group deaf to its peers' published failures for the rest of the job. (The core's own.)
  // answered false: the watch's look went unanswered as long as a read of the board's own
  // may wait (kStoreAnswerWait), which makes the board silent just as such a read would.
  void board_answered_again(bool answered = true) const;
  // For the stall watch's look, which reads the record in the same request as its own key
  // (one round trip a tick, bounded by the look, not a thread and two calls of its own):
  // whether `record`, what was found under board_key() on `store`, is another rank's failure
  // while the group is still usable here. Where `store` is not this group's board,
  // peer_has_failed() (a read of its own).
  bool peer_failure_in(const Store& store, const std::optional<std::string>& record) const;
  static const char* board_key();
  friend class StallWatch;
  // error, saying which world rank `culprit` is (a lost peer) when that differs and the
  // message does not say it already; for other failures, world_ranks_note_for its words.
  std::exception_ptr naming_world_rank(std::exception_ptr error, int culprit, const std::string& where) const;

  const int rank_;
  const StorePtr board_;
  mutable std::atomic<bool> board_gone_{false};
  std::atomic<bool> failed_{false};
  mutable std::mutex mu_;
  // Threads recording a failure now (reading the board, asking the explainer); a loss
  // (record_loss) waits for them (`recorded_`): the first failure seen is the cause, the
  // peer's exit its consequence. Other failures do not wait: a peer's published failure, or
  // a Timeout, must not be held up by an explainer.
  int recording_ = 0;
  std::condition_variable recorded_;
  std::optional<FailureRecord> first_;
  std::exception_ptr refusal_;
  bool shut_down_here_ = false;
  std::vector<std::function<void()>> hooks_;
  bool hooks_ran_ = false;
  Explainer explainer_;
  // The first failure's op and the error it ended with.
  const Work* first_op_ = nullptr;
  std::exception_ptr first_error_;
  std::shared_ptr<Follower> follower_;  // set by on_sibling_failure
};

}  // namespace distcomm

// set_world_ranks for plugins (ABI 1.7), weak: a plugin built with this header still loads
// in a core that predates it (a plain member function would be an undefined symbol there,
// and the loader's RTLD_NOW refuses the plugin); its subgroup errors then name group ranks
// only.
extern "C" void distcomm_group_failure_set_world_ranks(distcomm::GroupFailure* failure, const int* world_ranks,
                                                        size_t count) __attribute__((weak));

namespace distcomm {

inline void name_world_ranks(GroupFailure& failure, const std::vector<int>& world_ranks) {
  if (distcomm_group_failure_set_world_ranks) {
    distcomm_group_failure_set_world_ranks(&failure, world_ranks.data(), world_ranks.size());
  }
}

}  // namespace distcomm

// GroupFailure::stopped_by_launcher for a plugin: fills stopped[i] (1 or 0) for each of
// `count` group ranks, and `why` (NUL-terminated, cut to why_size) with the first stopped
// one's reason; returns how many were stopped.
extern "C" size_t distcomm_group_failure_launcher_stops(const distcomm::GroupFailure* failure, const int* group_ranks,
                                                         size_t count, unsigned char* stopped, char* why,
                                                         size_t why_size) __attribute__((weak));

namespace distcomm {

// Lost peers split by what ended them: those their launcher stopped because another rank
// failed (`why` says which), and the rest.
struct LauncherStops {
  std::vector<int> stopped;  // group ranks, as given
  std::vector<int> others;
  std::string why;  // "rank 9 failed (signal SIGKILL (Killed))", "" when none was stopped
};

// Nothing is stopped where the core predates the entry point.
inline LauncherStops launcher_stops(const GroupFailure& failure, const std::vector<int>& group_ranks) {
  LauncherStops split;
  std::vector<unsigned char> stopped(group_ranks.size(), 0);
  char why[512] = {};
  if (distcomm_group_failure_launcher_stops && !group_ranks.empty()) {
    distcomm_group_failure_launcher_stops(&failure, group_ranks.data(), group_ranks.size(), stopped.data(), why,
                                          sizeof(why));
  }
  for (size_t i = 0; i < group_ranks.size(); ++i) (stopped[i] ? split.stopped : split.others).push_back(group_ranks[i]);
  split.why = why;
  return split;
}

}  // namespace distcomm
