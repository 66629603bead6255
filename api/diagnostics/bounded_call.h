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
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <optional>
#include <thread>
#include <string>
#include <utility>

#include "api/store/internal/call_deadline.h"

namespace distcomm {
namespace internal {

// fn's result, or nothing when it threw (the store failed: there is nothing to be had from
// it) or did not return within `limit`. `gone`, when given, is set when a call runs out of
// time, and then later calls with it are not made: a store that did not answer once would
// cost every later step of the failure the same wait.
template <typename R>
std::optional<R> call_with_limit(std::function<R()> fn, std::chrono::milliseconds limit,
                                 std::atomic<bool>* gone = nullptr) {
  if (gone && gone->load()) return std::nullopt;
  // Store calls on the thread end by the limit too (call_deadline.h), so that an abandoned
  // one does not hold the store's connection, which the process's other calls share, for
  // the store's whole timeout.
  std::packaged_task<R()> task([fn = std::move(fn), limit, deadline = std::chrono::steady_clock::now() + limit]() -> R {
    StoreCallDeadline bounded(deadline, "a call made with a limit of " + std::to_string(limit.count()) + " ms");
    return fn();
  });
  std::future<R> result = task.get_future();
  try {
    std::thread(std::move(task)).detach();
  } catch (const std::system_error&) {
    return std::nullopt;  // no thread to be had (a process at its limit): no answer either
  }
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

}  // namespace internal
}  // namespace distcomm
