// A deadline for the store calls a thread makes while a scope lives. The core's own.
//
// A store call waits for as long as its store's timeout, which a group's store takes from
// the group (30 minutes by default): right for a rendezvous, wrong for a caller with a
// shorter bound of its own. A shrink({k}, 10 s) whose first call meets a stopped store
// server would wait 30 minutes; the stall watch, whose reports must come every tick, would
// fall silent for as long. Within a scope, TCPStore ends each call, its wait for another
// thread's request on the connection and its reconnect included, by the scope's deadline
// (a StoreCallCutShort saying so; a WAIT_FOR's server is told to end the wait early enough
// for its answer to come by then), and FileStore its wait for the file's lock (a poll of
// get() or wait() gets the lock at least 1 s). Scopes nest; the sooner deadline holds.
//
//   internal::StoreCallDeadline bound(Clock::now() + 2s, "the stall watch of group 'world'");
//   board.add(key, 1);  // a Timeout after 2 s at most, however long the store's timeout
//
// Only this thread's calls: a thread the scope's code starts is not bounded by it.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "api/errors.h"

namespace distcomm {
namespace internal {

// The Timeout of a store call that a thread's call deadline refused or cut short. The code
// that set the deadline catches it apart from a Timeout of the store's own (or a peer's
// failure record of kind timeout, raised as a Timeout too) and says what it was waiting
// for, instead of letting a bare "store CHECK not made" reach the user.
class StoreCallCutShort : public Timeout {
 public:
  // What the call was doing when its deadline came: kInTheCall, waiting for the store (its
  // server did not answer in time, or the file's lock did not come); kBehindAnotherRequest,
  // waiting for another thread of this process to be done with the store (its request
  // still unanswered: the server may be fine, that request a long wait); kNotMade, nothing:
  // the deadline had passed (or all but passed) before the call (what used up the time
  // came before it).
  enum Where { kInTheCall, kBehindAnotherRequest, kNotMade };
  explicit StoreCallCutShort(const std::string& what, Where where = kInTheCall) : Timeout(what), where_(where) {}
  ~StoreCallCutShort() override;
  Where where() const { return where_; }

 private:
  Where where_;
};

class StoreCallDeadline {
 public:
  StoreCallDeadline(std::chrono::steady_clock::time_point deadline, std::string what);
  ~StoreCallDeadline();
  StoreCallDeadline(const StoreCallDeadline&) = delete;
  StoreCallDeadline& operator=(const StoreCallDeadline&) = delete;

  // How long a store call of this thread may still take: nullopt outside every scope. Throws
  // Timeout, naming the scope, once its deadline has passed (a call begun then would only
  // be cut short, and a connection cut mid-request must be reopened): a StoreCallCutShort.
  static std::optional<std::chrono::milliseconds> time_left(const char* call);
  // "the deadline of <what>", of the scope that holds now ("" outside every scope).
  static std::string scope_name();
  // Whether this thread is in a scope whose deadline has passed (or is 10 ms away): a wait
  // that ended then was ended by the scope.
  static bool has_passed();

 private:
  std::chrono::steady_clock::time_point deadline_;
  std::string what_;
  StoreCallDeadline* enclosing_;
};

// t, or what is left of this thread's scope when that is less.
std::chrono::milliseconds within_call_deadline(std::chrono::milliseconds t, const char* call);

}  // namespace internal
}  // namespace distcomm
