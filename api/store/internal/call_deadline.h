// A deadline for the store calls a thread makes while a scope lives. The core's own.
//
// A store call waits for as long as its store's timeout, which a group's store takes from
// the group (30 minutes by default): right for a rendezvous, wrong for a caller with a
// shorter bound of its own. A shrink({k}, 10 s) whose first call meets a stopped store
// server would wait 30 minutes; the stall watch, whose reports must come every tick, would
// fall silent for as long. Within a scope, TCPStore ends each call, its wait for another
// thread's request on the connection included, by the scope's deadline (a Timeout saying so;
// a WAIT_FOR gets 2 s more for the server's answer), and FileStore its wait for the file's
// lock (a poll of get() or wait() gets the lock at least 1 s). Scopes nest; the sooner
// deadline holds.
//
//   internal::StoreCallDeadline bound(Clock::now() + 2s, "the stall watch of group 'world'");
//   board.add(key, 1);  // a Timeout after 2 s at most, however long the store's timeout
//
// Only this thread's calls: a thread the scope's code starts is not bounded by it.
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace distcomm {
namespace internal {

class StoreCallDeadline {
 public:
  StoreCallDeadline(std::chrono::steady_clock::time_point deadline, std::string what);
  ~StoreCallDeadline();
  StoreCallDeadline(const StoreCallDeadline&) = delete;
  StoreCallDeadline& operator=(const StoreCallDeadline&) = delete;

  // How long a store call of this thread may still take: nullopt outside every scope. Throws
  // Timeout, naming the scope, once its deadline has passed (a call begun then would only
  // be cut short, and a connection cut mid-request must be reopened).
  static std::optional<std::chrono::milliseconds> time_left(const char* call);
  // "the deadline of <what>", of the scope that holds now ("" outside every scope).
  static std::string scope_name();

 private:
  std::chrono::steady_clock::time_point deadline_;
  std::string what_;
  StoreCallDeadline* enclosing_;
};

// t, or what is left of this thread's scope when that is less.
std::chrono::milliseconds within_call_deadline(std::chrono::milliseconds t, const char* call);

}  // namespace internal
}  // namespace distcomm
