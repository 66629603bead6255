// The liveness monitor's store calls are bounded by the heartbeat timeout, not by the
// connection's default (5 minutes): with the job's store server stopped (SIGSTOP: its
// connections stay open and nothing answers), the monitor's heartbeat `add` used to wait the
// 5 minutes, and a Manager's destructor, which joins the monitor, with it (found by a helper
// reading the paths of a hang). A real TCPStore server in a forked process.
#include <chrono>
#include <future>
#include <memory>
#include <thread>

#include <gtest/gtest.h>

#include "api/store/tcp_store.h"
#include "ft/manager.h"
#include "tests/testing/forked_store_server.h"

namespace distcomm {
namespace ft {
namespace {

using namespace std::chrono_literals;

TEST(MonitorStoreBounds, AStoppedStoreServerHoldsTheMonitorNoLongerThanItsTimeout) {
  testing::ForkedStoreServer server;
  const int port = server.port();

  ManagerOptions o;
  o.member_id = "rank0";
  o.joining = false;
  o.initial_members = 1;
  o.heartbeat_interval = 20ms;
  o.heartbeat_timeout = 500ms;
  o.connect = [port]() -> StorePtr {
    TCPStoreOptions so;
    so.host = "127.0.0.1";
    so.port = port;
    so.timeout = 10s;  // connecting; the Manager sets each connection's call timeout
    return std::make_shared<TCPStore>(so);
  };
  auto manager = std::make_unique<Manager>(o);
  std::this_thread::sleep_for(100ms);  // beating
  server.stop();
  std::this_thread::sleep_for(200ms);  // the monitor is inside a call that gets no answer

  // The destructor joins the monitor, which must come out of that call within its timeout.
  const auto start = std::chrono::steady_clock::now();
  auto destroyed = std::async(std::launch::async, [&] { manager.reset(); });
  const bool in_time = destroyed.wait_for(10s) == std::future_status::ready;
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  server.kill();  // unblocks a call that waits on it, should the check fail
  destroyed.wait();
  EXPECT_TRUE(in_time) << "the Manager's destructor waited for the stopped store server";
  EXPECT_LT(took, 5.0) << "the monitor's store call outlived its 0.5 s timeout by this much";
}

}  // namespace
}  // namespace ft
}  // namespace distcomm
