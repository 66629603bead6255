#include "api/group/init_wait.h"
#include "api/group/sliced_store_wait.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "api/errors.h"
#include "api/diagnostics/duration_text.h"
#include "api/diagnostics/group_failure.h"
#include "api/store/internal/call_deadline.h"
#include "api/store/internal/store_host.h"
#include "api/logging.h"
#include "api/diagnostics/op_fingerprint.h"

namespace distcomm {
namespace {

using std::chrono::milliseconds;

}  // namespace

InitWait::Clock::time_point InitWait::store_calls_deadline() const {
  const Clock::time_point from = std::max(deadline, Clock::now());
  return from >= Clock::time_point::max() - kCreationStoreSlack ? Clock::time_point::max() : from + kCreationStoreSlack;
}

InitWait InitWait::starting_now(milliseconds timeout, milliseconds report_every, std::string where) {
  InitWait w;
  w.started = Clock::now();
  w.deadline = w.started + timeout;
  w.timeout = timeout;
  w.report_every = report_every > milliseconds::zero() ? report_every : kDefaultInitReportInterval;
  w.where = std::move(where);
  return w;
}

InitWait InitWait::for_backend(const std::map<std::string, std::string>& /*config*/, milliseconds timeout,
                               std::string where, const std::vector<int>& global_ranks, Store* store) {
  InitWait w = starting_now(timeout, kDefaultInitReportInterval, std::move(where));
  if (const InitWait* creation = BackendCreationScope::current()) {
    w.deadline = creation->deadline;
    w.report_every = creation->report_every;
  }
  w.global_ranks = global_ranks;
  if (store) {
    w.failure_store = store;
    w.failure_key = kCreationFailedKey;
  }
  return w;
}

namespace {
thread_local const InitWait* current_creation = nullptr;
}  // namespace

BackendCreationScope::BackendCreationScope(const InitWait& wait) : previous_(current_creation) {
  current_creation = &wait;
}

BackendCreationScope::~BackendCreationScope() { current_creation = previous_; }

const InitWait* BackendCreationScope::current() { return current_creation; }

namespace {
thread_local const EnclosingCreationScope* innermost_enclosing = nullptr;
}  // namespace

EnclosingCreationScope::EnclosingCreationScope(const InitWait& outer)
    : store_(outer.failure_store),
      key_(outer.failure_key),
      where_(outer.where),
      global_ranks_(outer.global_ranks),
      previous_(innermost_enclosing) {
  innermost_enclosing = this;
}

EnclosingCreationScope::~EnclosingCreationScope() { innermost_enclosing = previous_; }

// The creations around a wait on this thread, for wait_until: the group's creation making a
// backend (BackendCreationScope: a backend's own wait looks in that backend's namespace,
// where confirm writes only for the backends the group's spec names, and a hierarchical
// group's flat backend across hosts (mpi) is not among them), and every enclosing creation.
struct EnclosingCreations {
  static bool any() { return innermost_enclosing != nullptr || current_creation != nullptr; }
  // Raises the failure of the first of them found to have failed, if any has.
  // waiting(): what the wait was doing, asked only when one has failed.
  static void raise_any_failure(const InitWait& w, const std::function<std::string()>& waiting) {
    const InitWait* creating = current_creation;
    if (creating && creating != &w && creating->failure_store &&
        !(creating->failure_store == w.failure_store && creating->failure_key == w.failure_key) &&
        creating->failure_store->check({creating->failure_key})) {
      const CreationFailure first = CreationFailure::decode(creating->failure_store->get_string(creating->failure_key),
                                                            creating->global_ranks);
      first.raise(waiting() + ": the group's creation failed on " + first.text);
    }
    for (const EnclosingCreationScope* s = innermost_enclosing; s; s = s->previous_) {
      if (!s->store_ || !s->store_->check({s->key_})) continue;
      const CreationFailure first = CreationFailure::decode(s->store_->get_string(s->key_), s->global_ranks_);
      first.raise(waiting() + ": the creation of the group this one is part of (" + s->where_ + ") failed on " +
                  first.text);
    }
  }
};

milliseconds InitWait::left() const {
  return std::max(milliseconds::zero(), std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
}

std::string InitWait::waited_text() const {
  return seconds_text(std::chrono::duration_cast<milliseconds>(Clock::now() - started));
}

namespace {

// "ranks [2]", "ranks [1] (world ranks [5])" in a subgroup, or, when the phase cannot tell
// which ranks it waits for (MPI_Init's fence), "the other ranks".
std::string whom(const std::vector<int>& missing, const std::vector<int>& global_ranks) {
  if (missing.empty()) return "the other ranks";
  std::string text = "ranks " + rank_list_text(missing);
  std::vector<int> world;
  bool differs = false;
  for (int r : missing) {
    if (r < 0 || static_cast<size_t>(r) >= global_ranks.size()) return text;
    world.push_back(global_ranks[static_cast<size_t>(r)]);
    differs = differs || world.back() != r;
  }
  bool identity = true;
  for (size_t r = 0; r < global_ranks.size(); ++r) identity = identity && global_ranks[r] == static_cast<int>(r);
  return identity && !differs ? text : text + " (world ranks " + rank_list_text(world) + ")";
}

// InitWait::until's loop; who(ask) names whom it waits for (asking afresh when ask is set).
void wait_until(const InitWait& w, const std::string& what, const std::function<bool(milliseconds)>& poll,
                const std::function<std::string(bool ask)>& who, const std::string& hint) {
  using Clock = InitWait::Clock;
  // The polls are sliced to the deadline; the looks at the failure key and at who is missing
  // are single calls, which a store that does not answer (or a FileStore lock held by a
  // stopped process) would hold for the store's timeout.
  internal::StoreCallDeadline bounded(w.store_calls_deadline(), "the creation of " + w.where);
  Clock::time_point next_report = Clock::now() + w.report_every;
  // The wait's own Timeout; ask: whether whom it waits for may still be asked of the store.
  auto timed_out = [&](bool ask) {
    return Timeout(w.where + ": init timed out after " + w.waited_text() + " (the group's timeout is " +
                   seconds_text(w.timeout) + ") waiting for " + who(ask) + " " + what + (hint.empty() ? "" : "; " + hint));
  };
  // This process's store server cannot accept() for want of file descriptors (rank 0
  // serves it: store_host.h): since when this wait has seen that, and whom it waited for
  // then. Ranks that cannot get in never arrive: once the spell has lasted
  // kAcceptStarvedGrace with them still missing, the wait ends with why.
  Clock::time_point starved_seen{};
  std::string starved_who;
  for (;;) {
    const Clock::time_point now = Clock::now();
    Clock::time_point until = std::min(w.deadline, next_report);
    if (w.failure_store || EnclosingCreations::any() || internal::accept_starved_now(internal::accept_starvation(), now)) {
      until = std::min(until, now + kCreationFailedCheck);
    }
    // At least a millisecond, so that a phase already done is seen even at the deadline.
    const milliseconds slice =
        std::max(milliseconds(1), std::chrono::duration_cast<milliseconds>(until - now));
    try {
      if (poll(slice)) return;
      w.raise_if_creation_failed([&] { return w.where + ": init gave up waiting for " + who(true) + " " + what; });
    } catch (const InvalidArgument& e) {
      // The store says the job cannot run (a rank of it counts another world size): no
      // wait can end well, and the others' errors say the same.
      throw InvalidArgument(w.where + ": init stopped waiting for " + who(false) + " " + what + ": " + e.what());
    } catch (const internal::StoreCallCutShort& e) {
      // A look at the store (a failure key, a phase's own check) that did not finish by the
      // creation's store deadline: the store, not a rank, is what did not answer; or one not
      // made since the deadline had passed: the wait's own timeout, as below.
      if (e.where() != internal::StoreCallCutShort::kNotMade) w.raise_store_did_not_answer(who(false) + " " + what, e);
      throw timed_out(false);
    } catch (const StoreError& e) {
      // The store has gone (its server's process exited, or closed it): nothing more can
      // come through it, and what this rank knew is all it can say.
      std::rethrow_exception(internal::store_lost(
          e, w.where + ": init gave up waiting for " + who(false) + " " + what + ": the store failed (" + e.what() + ")",
          w.store_host));
    }
    const Clock::time_point after = Clock::now();
    const internal::AcceptStarvation starved = internal::accept_starvation();
    if (!internal::accept_starved_now(starved, after)) {
      starved_seen = {};
    } else {
      const std::string missing = who(true);
      if (starved_seen == Clock::time_point{} || starved.first > starved_seen || missing != starved_who) {
        starved_seen = after;  // a new spell, or a rank came: the grace starts again
        starved_who = missing;
      } else if (after - starved_seen >= internal::kAcceptStarvedGrace) {
        throw Timeout(w.where + ": init gave up after " + w.waited_text() + " waiting for " + missing + " " + what +
                      ": " + internal::describe_accept_starvation(starved));
      }
    }
    if (after >= w.deadline) throw timed_out(true);
    if (after >= next_report) {
      log_line("distcomm: " + w.where + ": init has waited " + w.waited_text() + " for " + who(true) + " " + what +
               " (it gives up in " + seconds_text(w.left()) + ")");
      next_report = after + w.report_every;
    }
  }
}

}  // namespace

void InitWait::until(const std::string& what, const std::function<bool(milliseconds)>& poll,
                     const std::function<std::vector<int>()>& missing, const std::string& hint) const {
  // Whom it waits for: asked afresh when it speaks (missing() may cost a store call per
  // rank, too much for every slice); what it last knew once the store is gone.
  std::vector<int> last_known;  // empty: "the other ranks"
  wait_until(
      *this, what, poll,
      [&](bool ask) {
        try {
          if (ask) last_known = missing();
        } catch (const StoreError&) {
        } catch (const Timeout&) {
          // The store did not answer by the creation's deadline: what was known stands.
        }
        return whom(last_known, global_ranks);
      },
      hint);
}

void InitWait::until_named(const std::string& whom, const std::string& what,
                           const std::function<bool(milliseconds)>& poll, const std::string& hint) const {
  wait_until(*this, what, poll, [&](bool) { return whom; }, hint);
}

void InitWait::raise_if_creation_failed(const std::function<std::string()>& waiting) const {
  if (failure_store && failure_store->check({failure_key})) {
    const CreationFailure first = CreationFailure::decode(failure_store->get_string(failure_key), global_ranks);
    first.raise(waiting() + ": the group's creation failed on " + first.text);
  }
  EnclosingCreations::raise_any_failure(*this, waiting);
}

void InitWait::raise_store_did_not_answer(const std::string& waiting_for, const std::exception& cut) const {
  const std::string timed_out = where + ": init timed out after " + waited_text() + " (the group's timeout is " +
                                seconds_text(timeout) + ") waiting for " + waiting_for;
  const auto* cut_short = dynamic_cast<const internal::StoreCallCutShort*>(&cut);
  if (cut_short && cut_short->where() == internal::StoreCallCutShort::kBehindAnotherRequest) {
    // The server may be fine: another thread of this process held the connection.
    throw Timeout(timed_out + ": this process's connection to the store stayed busy with another thread's request (" +
                  cut.what() + ")");
  }
  if (cut_short && cut_short->where() == internal::StoreCallCutShort::kNotMade) {
    // The time went before this call, waiting for what the caller names.
    throw Timeout(timed_out + " (" + cut.what() + ")");
  }
  throw Timeout(timed_out + ": the store did not answer in time (" + cut.what() + ")" +
                (store_host.empty() ? "" : "; " + store_host + " serves it: is that process stopped?"));
}

void InitWait::say_creation_failed(int rank, const std::exception_ptr& error) const {
  const std::string record = encode_creation_failure(rank, error);
  auto say = [&](Store* store, const std::string& key) {
    if (!store || key.empty()) return;
    try {
      store->compare_set(key, {}, to_bytes(record));
    } catch (const std::exception&) {
      // The store has gone too: this rank's own error says more than this record could.
    }
  };
  // The group's key first: it is the one confirmation reads as the creation's first
  // failure, and a peer that learns of this one from the backend's key and fails for it
  // must find this record there, not write its own first.
  const InitWait* creating = BackendCreationScope::current();
  if (creating && creating != this) say(creating->failure_store, creating->failure_key);
  say(failure_store, failure_key);
}

CreationFailure CreationFailure::decode(const std::string& value, const std::vector<int>& global_ranks) {
  CreationFailure f;
  const std::optional<FailureRecord> r = FailureRecord::decode(value);
  if (!r) {
    f.text = value;  // not a record: said as it is
    return f;
  }
  f.text = "rank " + std::to_string(r->rank);
  if (r->rank >= 0 && static_cast<size_t>(r->rank) < global_ranks.size() &&
      global_ranks[static_cast<size_t>(r->rank)] != r->rank) {
    f.text += " (world rank " + std::to_string(global_ranks[static_cast<size_t>(r->rank)]) + ")";
  }
  f.text += ": " + r->message;
  f.timed_out = r->kind == FailureRecord::Kind::kTimeout;
  return f;
}

CreationFailure CreationFailure::decode(const std::string& value) { return decode(value, {}); }

void CreationFailure::raise(const std::string& message) const {
  if (timed_out) throw Timeout(message);
  throw PeerFailure(message);
}

std::string encode_creation_failure(int rank, const std::exception_ptr& error) {
  FailureRecord r;
  r.kind = FailureRecord::kind_of(error);
  r.rank = rank;
  r.message = message_of(error);
  r.time = std::chrono::system_clock::now();
  return r.encode();
}

void wait_for_keys(Store& store, const std::vector<std::string>& keys, const std::vector<int>& ranks,
                   const InitWait& w, const std::string& what, const std::string& hint,
                   const std::function<void()>& check) {
  SlicedStoreWait wait(store, keys, "ranks' keys " + what);
  if (check) {
    // With a check, look often: what has come may end the wait long before the rest; and
    // in slices, with the connection free between them (kWaitSlice).
    wait.look_every(kCreationFailedCheck, check, /*when_done=*/true);
  } else {
    // Nothing to look at between slices: each poll is one wait of the store, as long as
    // until allows (at most kCreationFailedCheck), which looks for failures between polls.
    wait.slices(std::chrono::hours(1), milliseconds::zero());
  }
  w.until(
      what,
      [&](milliseconds slice) {
        try {
          return wait.wait_until(InitWait::Clock::now() + slice);
        } catch (const internal::StoreCallCutShort& e) {
          // Not made: the creation's store deadline had passed, and wait_until's own
          // deadline (which comes before it) says the rest. Cut short in the call: the
          // store did not answer, which wait_until says.
          if (e.where() != internal::StoreCallCutShort::kNotMade) throw;
          return false;
        }
      },
      [&] {
        std::vector<int> missing;
        for (size_t i = 0; i < keys.size(); ++i) {
          if (!store.check({keys[i]})) missing.push_back(ranks[i]);
        }
        return missing;
      },
      hint);
}

namespace {
const std::string kNotArrivedHint =
    "they have not called init_process_group (or new_group) yet, cannot reach the store, or are stuck or gone";
}  // namespace

void wait_for_arrivals(Store& store, const std::string& prefix, int rank, int size, const InitWait& w,
                       const std::string& store_text, const std::string& extra_hint, const std::string& value) {
  std::vector<std::string> keys;
  std::vector<int> ranks;
  for (int r = 0; r < size; ++r) {
    keys.push_back(prefix + "arrived/" + std::to_string(r));
    ranks.push_back(r);
  }
  try {
    internal::StoreCallDeadline bounded(w.store_calls_deadline(), "the creation of " + w.where);
    store.set(keys[static_cast<size_t>(rank)], value);
  } catch (const internal::StoreCallCutShort& e) {
    w.raise_store_did_not_answer("the store to take this rank's arrival (" + store_text + ")", e);
  }
  wait_for_keys(store, keys, ranks, w, "to arrive at the store (" + store_text + ")",
                kNotArrivedHint + (extra_hint.empty() ? "" : "; " + extra_hint));
}

void wait_for_arrivals(Store& store, const std::vector<std::string>& keys, const std::vector<int>& ranks,
                       const InitWait& w, const std::string& store_text, const std::function<void()>& check) {
  wait_for_keys(store, keys, ranks, w, "to arrive at the store (" + store_text + ")", kNotArrivedHint, check);
}

}  // namespace distcomm
