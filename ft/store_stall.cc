#include "ft/store_stall.h"

#include <thread>

#include "ft/liveness_monitor.h"

namespace distcomm {
namespace ft {
namespace {

// Between two tries of a call the store did not answer. A reconnect into a stopped server
// already takes a second (its handshake's bound); one that fails at once (a store stand-in,
// a cut-off connection before the monitor says why) is not asked in a tight loop.
constexpr std::chrono::milliseconds kStallRetryPause{100};

}  // namespace

bool store_process_ended(const StoreError& e) {
  return std::string(e.what()).find("Connection refused") != std::string::npos;
}

bool store_may_answer_again(const StoreError& e) {
  return dynamic_cast<const StoreRefused*>(&e) == nullptr && !store_process_ended(e);
}

void through_store_stall(const LivenessMonitor& monitor, std::chrono::milliseconds bound,
                         const std::function<void()>& call) {
  std::optional<std::chrono::steady_clock::time_point> give_up;
  for (;;) {
    try {
      call();
      return;
    } catch (const StoreError& e) {
      if (!store_may_answer_again(e)) throw;
      // Lost (no beat of this member through for its recovery timeout; its connections are
      // cut off now): the store's own words first, then the monitor's.
      const std::string lost = monitor.lost_store();
      if (!lost.empty()) {
        // A call that itself asked the monitor (throw_if_store_lost) already says it.
        if (std::string(e.what()).find(lost) != std::string::npos) throw;
        std::rethrow_exception(with_detail(std::current_exception(), lost));
      }
      const auto now = std::chrono::steady_clock::now();
      if (!give_up) give_up = now + bound;
      if (now >= *give_up) throw;
    }
    std::this_thread::sleep_for(kStallRetryPause);
  }
}

}  // namespace ft
}  // namespace distcomm
