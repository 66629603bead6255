// A call to a store that a failing group makes, with a limit on how long the group waits
// for it. The core's own (not a public header).
//
// A store can block much longer than a failure may take to be reported: a TCPStore whose
// server died retries its connection until the store timeout, and one whose server is
// stopped (a frozen host or container) waits for that timeout for every reply. A failing
// group must not turn into a hang, so what it asks of a store runs on a thread of its own,
// and a call still running after `limit` is abandoned: that thread holds what it needs
// (fn's captures; never a reference into the caller's frame) and ends when the store gives
// up.
//
// When no thread can be had for a call (the process is at its limit on threads, RLIMIT_NPROC
// or a container's pids.max, or on address space for a stack, RLIMIT_AS / ulimit -v; or
// memory for the call's state is refused), the call is not made and counts as one that
// could not be asked in time: nullopt, as for a store that did not answer. It is not run on
// the caller's thread instead: that would take away the bound, and the callers (a failing
// group, the stall watch's thread) must not hang on a silent store. Nor is `gone` set: the
// store did not fail to answer. Nothing is thrown: these run on threads that must not let
// an exception escape (a std::system_error from std::thread, or a std::bad_alloc, used to
// end the process by std::terminate, with no message).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <optional>
#include <thread>
#include <string>
#include <utility>
#include <vector>

namespace distcomm {
namespace internal {

// fn started on a detached thread of its own, its result to come in the future; an invalid
// future when the thread (or the call's state) could not be had -- see the note above.
template <typename R>
std::future<R> start_detached(std::function<R()> fn) noexcept {
  try {
    std::packaged_task<R()> task(std::move(fn));
    std::future<R> result = task.get_future();
    std::thread(std::move(task)).detach();
    return result;
  } catch (...) {
    return std::future<R>();
  }
}

// fn's result, or nothing when it threw (the store failed: there is nothing to be had from
// it), did not return within `limit`, or could not be started (no thread: see above).
// `gone`, when given, is set when a call runs out of time, and then later calls with it are
// not made: a store that did not answer once would cost every later step of the failure
// the same wait.
template <typename R>
std::optional<R> call_with_limit(std::function<R()> fn, std::chrono::milliseconds limit,
                                 std::atomic<bool>* gone = nullptr) {
  if (gone && gone->load()) return std::nullopt;
  // Not bounded by a StoreCallDeadline: an abandoned write (a failure record) must still land
  // when the store is merely slow, and a call that does not return sets `gone`. Another
  // thread's call does not queue behind it for longer than its own bound (TCPStore).
  std::future<R> result = start_detached<R>(std::move(fn));
  if (!result.valid()) return std::nullopt;  // no thread to be had: no answer either
  if (result.wait_for(limit) != std::future_status::ready) {
    if (gone) gone->store(true);
    return std::nullopt;
  }
  try {
    return result.get();
  } catch (...) {
    return std::nullopt;
  }
}

// As call_with_limit (without `gone`), and given up on sooner once `give_up` says so: it is
// asked every 50 ms while fn runs (a store another call has found silent meanwhile).
template <typename R>
std::optional<R> call_with_limit_until(std::function<R()> fn, std::chrono::milliseconds limit,
                                       const std::function<bool()>& give_up) {
  std::future<R> result = start_detached<R>(std::move(fn));
  if (!result.valid()) return std::nullopt;  // no thread to be had: no answer either
  const auto until = std::chrono::steady_clock::now() + limit;
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= until) return std::nullopt;
    const auto slice = std::min<std::chrono::steady_clock::duration>(until - now, std::chrono::milliseconds(50));
    if (result.wait_for(slice) == std::future_status::ready) break;
    if (give_up && give_up()) return std::nullopt;
  }
  try {
    return result.get();
  } catch (...) {
    return std::nullopt;
  }
}

// Each of calls, all at once, each on a thread of its own as call_with_limit's: returns
// once every one has ended or `limit` has passed since the first started (what is still
// running then is abandoned). Their results are not needed: the calls are what matters.
template <typename R>
void call_each_with_limit(std::vector<std::function<R()>> calls, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::vector<std::future<R>> running;
  try {
    running.reserve(calls.size());
  } catch (...) {
    return;  // no memory even for the list: no call is made
  }
  for (std::function<R()>& fn : calls) {
    std::future<R> result = start_detached<R>(std::move(fn));
    if (result.valid()) running.push_back(std::move(result));  // else that call is not made
  }
  for (std::future<R>& r : running) r.wait_until(deadline);
}

}  // namespace internal
}  // namespace distcomm
