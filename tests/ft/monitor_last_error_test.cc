// The liveness monitor's last store error is what a failure of a step is told with ("this
// member's liveness monitor's last store error: ..."): once a heartbeat reaches the store
// again it explains nothing, and it must not be quoted with every later, unrelated failure
// (an outside soak: a 3 s store stall's "no reply to ADD" rode on generation lines for
// minutes after).
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "api/errors.h"
#include "api/store/hash_store.h"
#include "ft/liveness_monitor.h"
#include "tests/testing/forwarding_store.h"

namespace distcomm {
namespace ft {
namespace {

using namespace std::chrono_literals;

// A store whose calls fail while `failing` is set, as a stalled store's do.
class FlakyStore : public testing::ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  std::atomic<bool> failing{false};
  int64_t add(const std::string& key, int64_t delta) override {
    if (failing) throw StoreError("TCPStore: no reply to ADD within 3 s (test)");
    return ForwardingStore::add(key, delta);
  }
};

bool eventually(const std::function<bool()>& what, std::chrono::milliseconds within) {
  const auto until = std::chrono::steady_clock::now() + within;
  while (!what()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

TEST(MonitorLastError, AStoreErrorIsForgottenOnceAHeartbeatReachesTheStore) {
  auto store = std::make_shared<FlakyStore>(std::make_shared<HashStore>());
  LivenessMonitor monitor(store, "rank0", /*interval=*/10ms, /*heartbeat_timeout=*/5s, /*store_loss_timeout=*/60s);
  store->failing = true;
  ASSERT_TRUE(eventually([&] { return !monitor.last_error().empty(); }, 5s)) << "no error seen while failing";
  EXPECT_NE(monitor.last_error().find("no reply to ADD"), std::string::npos) << monitor.last_error();
  store->failing = false;
  EXPECT_TRUE(eventually([&] { return monitor.last_error().empty(); }, 5s))
      << "still quoted after the store answered again: " << monitor.last_error();
}

}  // namespace
}  // namespace ft
}  // namespace distcomm
