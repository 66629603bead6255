// Waiting at a group's creation: one deadline for every phase, and never silently.
//
// Creating a group waits on other ranks several times: for rank 0's store to come up, for
// every rank to arrive at the store, then inside the backend's rendezvous (gloo: the peers'
// addresses, then each connection). Each phase alone obeying the group's timeout would let
// the whole take a multiple of it, so they share one deadline, counted from the start of
// init_process_group (or new_group). And a job stuck at init with the default 30-minute
// timeout must not look like a hang: every report interval (30 s unless
// DISTCOMM_INIT_REPORT_SECONDS says otherwise) each waiting rank logs which ranks it still
// waits for, and at the deadline the Timeout names them.
//
// Backends learn the deadline from the group that creates them, typed: the group makes each
// backend inside a BackendCreationScope holding its creation's InitWait, and the backend's
// rendezvous asks InitWait::for_backend() for it.
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "api/device.h"
#include "api/store/store.h"

namespace distcomm {

// Where a rank whose part of a group's creation failed says why, in the group's namespace of
// the store and in each backend's: waits of the others that see it end at once.
inline constexpr const char* kCreationFailedKey = "creation_failed";
// A group's keys in its store ("pg/<name>"; the n-th creation of that name, n > 1, under
// "pg/<name>@<n>"), and where the first creation's first failure is said: a process that
// learns that a rank of a group being made is gone (ft's liveness monitor) may say so there
// (encode_creation_failure), and the others' waits end as if that rank had failed.
inline std::string group_store_base(const std::string& group_name) { return "pg/" + group_name; }
// A group's namespace for the backend `plugin` serving `device` ("pg/<name>/cpu/gloo" under
// a group prefix "pg/<name>/"), where that backend's rendezvous looks for the same key.
std::string backend_store_prefix(const std::string& group_prefix, DeviceType device, const std::string& plugin);
// How often a wait that can see that key looks at it: how late the others learn.
inline constexpr std::chrono::milliseconds kCreationFailedCheck{500};
inline constexpr std::chrono::milliseconds kCreationStoreSlack{2000};

// A wait over a store that other threads of this process use meanwhile (the host exchange's;
// new_group's, whose parent's backends publish a failure through the same store) holds the
// store's one connection for at most kWaitSlice at a time, then leaves it free for
// kStoreLeftFree (a thread waiting to use it gets it then: the mutex is not fair to a thread
// that lets go and takes it again at once). Most calls end within the first slice; a longer
// one costs a tenth more.
inline constexpr std::chrono::milliseconds kWaitSlice{50};
inline constexpr std::chrono::milliseconds kStoreLeftFree{5};

// 30 s, as the users asked: often enough to see, rare enough not to flood a log.
inline constexpr std::chrono::milliseconds kDefaultInitReportInterval = std::chrono::seconds(30);

// What is left under kCreationFailedKey (encode_creation_failure), read back.
struct CreationFailure {
  std::string text;        // "rank 0: <its error's message>"
  bool timed_out = false;  // that error was a Timeout

  // global_ranks: the group's world rank of each of its ranks ("rank 1 (world rank 3): ..."
  // where they differ); empty: the group's ranks are the world's.
  static CreationFailure decode(const std::string& value, const std::vector<int>& global_ranks);
  // The group's ranks as the world's. Kept as its own symbol for callers outside the tree
  // built before global_ranks existed.
  static CreationFailure decode(const std::string& value);
  // Throws `message` as the error of a rank that learned of this failure: a Timeout when it
  // was one (it names the ranks that never came: the job's cause), else a PeerFailure.
  [[noreturn]] void raise(const std::string& message) const;
};
// The value a rank whose part of a creation failed with `error` leaves under kCreationFailedKey.
std::string encode_creation_failure(int rank, const std::exception_ptr& error);

struct InitWait {
  using Clock = std::chrono::steady_clock;

  Clock::time_point deadline;
  std::chrono::milliseconds timeout{0};       // what the deadline was made of, for messages
  std::chrono::milliseconds report_every = kDefaultInitReportInterval;
  Clock::time_point started;                  // for "has waited 30 s"
  std::string where;                          // "rank 0/3 group 'world'"
  // The world rank of each group rank, for a subgroup whose ranks are not the world's:
  // messages then name both ("ranks [1] (world ranks [5])"). Empty: the same.
  std::vector<int> global_ranks;
  // When set, every wait also looks at failure_key in it (at least every
  // kCreationFailedCheck) and ends with a PeerFailure quoting it: another rank has failed
  // its part of the creation, so nothing this rank waits for will come.
  Store* failure_store = nullptr;
  std::string failure_key;
  // The process that serves the store ("rank 0", or "the launcher"), when one of the job's
  // does: a wait whose store goes away (the connection closes, reconnecting is refused)
  // then ends with a PeerFailure saying that it has gone, with the ranks this rank was
  // still waiting for when it last knew.
  // Without it, a StoreError saying the same without naming a rank.
  std::string store_host;

  static InitWait starting_now(std::chrono::milliseconds timeout, std::chrono::milliseconds report_every,
                               std::string where);
  // When the creation's store calls give up (a StoreCallDeadline, store/internal/call_deadline.h):
  // kCreationStoreSlack after the deadline, or after now when that has passed, so that a phase
  // already done is still seen at the deadline, while a store that does not answer (its
  // server stopped) costs the creation its own timeout, not the store's.
  Clock::time_point store_calls_deadline() const;
  // A backend's rendezvous: the deadline and report interval of the group's creation that
  // is making the backend on this thread (BackendCreationScope); a backend created outside
  // a group's creation starts a full `timeout` now. config is the backend's (kept for the
  // plugins built against this signature; nothing in it is read). With the backend's
  // store, its waits also end when another rank's creation failed.
  static InitWait for_backend(const std::map<std::string, std::string>& config,
                              std::chrono::milliseconds timeout, std::string where,
                              const std::vector<int>& global_ranks = {}, Store* store = nullptr);

  std::chrono::milliseconds left() const;
  // How long since `started`, for messages ("12.5 s").
  std::string waited_text() const;

  // `what` says what the ranks are waiting to do, as the rest of a sentence that follows
  // "waiting for ranks [2] " (or "the other ranks "): a verb phrase in the infinitive, lower
  // case, no trailing punctuation, naming the phase and the backend: "to publish their gloo
  // addresses", "to say hello over storebk". It is not a label ("storebk hello"): the
  // messages read "init has waited 30.0 s for ranks [2] <what>" and "<where>: init timed out
  // after ... waiting for ranks [2] <what>". `where` (for_backend's) should name the rank and
  // group (group_rank_text: "rank 0/2 group 'world' (mine)"): an error that begins so is
  // passed on by the group's creation as it is, others get "rank 0/2 group 'world': while
  // creating backend 'mine': " put before them.
  // Repeats poll(slice) until it returns true. poll waits at most `slice` (never past the
  // deadline, never more than a report interval) and returns whether the phase is done.
  // Every report interval it logs one line naming missing() ("init has waited 30 s of
  // 1800 s for ranks [2] to arrive at the store"); at the deadline it throws Timeout
  // naming them, with `hint` (what those ranks may be doing) appended. A phase that cannot
  // tell which ranks it waits for returns none from missing(): "the other ranks".
  // Another rank's creation failure (failure_key) ends it with that rank's error quoted
  // (CreationFailure::raise); a StoreError out of poll, missing() or that look is the store
  // going away (see store_host). While a TCPStore server of this process cannot accept()
  // for want of file descriptors (rank 0's: store/internal/store_host.h), a wait whose
  // missing ranks stay the same for kAcceptStarvedGrace (3 s) ends with a Timeout saying so:
  // those ranks cannot get in.
  void until(const std::string& what, const std::function<bool(std::chrono::milliseconds)>& poll,
             const std::function<std::vector<int>()>& missing, const std::string& hint) const;
  // The same, waiting for a process that is not one of the group's ranks, which `whom`
  // names ("the launcher", which serves the store: "init has waited 30.0 s for the launcher
  // to serve the store at ...").
  void until_named(const std::string& whom, const std::string& what,
                   const std::function<bool(std::chrono::milliseconds)>& poll, const std::string& hint) const;

  // Throws, as until does, when another rank's part of this creation (failure_key) or of
  // one enclosing it has failed; waiting() says what this rank was doing ("init gave up
  // waiting for ..."), asked only then. For a failure seen outside until: a peer that
  // refuses a connection is most often one that failed first and closed, and its error,
  // not the refusal, is the job's cause.
  void raise_if_creation_failed(const std::function<std::string()>& waiting) const;
  // Throws init's own Timeout for a store call the creation's store deadline refused or cut
  // short (a StoreCallCutShort, `cut`): "<where>: init timed out after 12.0 s (...) waiting
  // for <waiting_for>: the store did not answer in time (<cut>); rank 0 serves it: is that
  // process stopped?", rather than the bare store call's words.
  [[noreturn]] void raise_store_did_not_answer(const std::string& waiting_for, const std::exception& cut) const;
  // Says now that this rank's part of the creation failed with `error` (group rank `rank`),
  // under failure_key and the creating group's key (BackendCreationScope), unless another
  // rank said so first. A backend's rendezvous calls it before it closes its connections,
  // so that a peer those closings reach already finds why (GroupCreation::confirm says it
  // too, later; it knows this rank's record by its rank). Never throws: a store that has
  // gone leaves this rank's own error to say it.
  void say_creation_failed(int rank, const std::exception_ptr& error) const;
};

// While one lives, the backend a group's creation makes on this thread (a plugin's create()
// or create_subgroup_backend(), which run their rendezvous on the calling thread) takes
// `wait`'s deadline through InitWait::for_backend, and a host exchange over the store
// (host_exchange.h: the auto backend's placements) waits under `wait` itself. A scope, not a field of BackendOptions:
// a new field there would change the layout of a struct of plugin ABI 1 (plugin.h), and
// text in the config would be parsed back by every plugin.
class BackendCreationScope {
 public:
  explicit BackendCreationScope(const InitWait& wait);
  ~BackendCreationScope();
  BackendCreationScope(const BackendCreationScope&) = delete;
  BackendCreationScope& operator=(const BackendCreationScope&) = delete;
  // The innermost scope's wait on this thread, null outside any.
  static const InitWait* current();

 private:
  const InitWait* previous_;
};

// While one lives, every InitWait::until on this thread also ends as soon as the creation
// `outer` waits for has failed on another rank (outer's failure_key): the groups a group makes
// during its own creation (a hierarchical group's levels, made before it is confirmed) wait
// for ranks that may have failed elsewhere in that creation and will never come to them,
// nor say so where those groups look. Scopes nest (a level's backends see every enclosing
// creation). Thread-local like BackendCreationScope, and for the same reason: InitWait's
// layout is the plugins' too.
class EnclosingCreationScope {
 public:
  explicit EnclosingCreationScope(const InitWait& outer);
  ~EnclosingCreationScope();
  EnclosingCreationScope(const EnclosingCreationScope&) = delete;
  EnclosingCreationScope& operator=(const EnclosingCreationScope&) = delete;

 private:
  friend struct EnclosingCreations;
  Store* store_;
  std::string key_;
  std::string where_;  // outer's: "rank 2/4 group 'world'"
  std::vector<int> global_ranks_;  // outer's
  const EnclosingCreationScope* previous_;
};

// InitWait::until for a phase over a store: it ends when every keys[i] exists; the ranks
// missing are ranks[i] of the keys that do not. check, when given, runs after a look at the
// keys at least every kCreationFailedCheck and after the last, and may end the phase by
// throwing: what the keys that have come say may already doom it (new_group's lists), or a
// rank it waits for may be known gone (new_group's parent); such a wait leaves the store's
// connection free between slices (kWaitSlice), so that the threads that would publish that
// are not held behind it.
void wait_for_keys(Store& store, const std::vector<std::string>& keys, const std::vector<int>& ranks,
                   const InitWait& w, const std::string& what, const std::string& hint,
                   const std::function<void()>& check = {});

// Every rank of a group of `size` posts "<prefix>arrived/<rank>" and waits, within w, until
// every rank has: the first phase of a group's creation, so that a rank that never called
// init (or new_group) is named before any backend starts waiting for it.
// extra_hint: said after the usual reasons where this rank knows more (a second process
// with its rank, GroupCreation::claim_rank). value: what this rank's key holds, for the
// others to compare with theirs once every rank has come (GroupCreation: its backend).
void wait_for_arrivals(Store& store, const std::string& prefix, int rank, int size, const InitWait& w,
                       const std::string& store_text, const std::string& extra_hint = "",
                       const std::string& value = "1");
// The same phase over keys the ranks posted elsewhere (keys[i] by group rank ranks[i]; this
// rank's already posted), with wait_for_keys' check: new_group's lists (member_lists.h).
void wait_for_arrivals(Store& store, const std::vector<std::string>& keys, const std::vector<int>& ranks,
                       const InitWait& w, const std::string& store_text, const std::function<void()>& check);

}  // namespace distcomm
