// The store's farewell (api/store/internal/store_host.h): a TCPStore serving the job's store,
// destroyed after this process published a failure, serves on until its clients leave, at
// most a second; without a failure it goes at once.
#include <chrono>
#include <memory>
#include <thread>

#include <gtest/gtest.h>

#include "api/errors.h"
#include "api/store/internal/store_host.h"
#include "api/store/tcp_store.h"

namespace distcomm {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct ServerAndClient {
  std::unique_ptr<TCPStore> server;
  std::unique_ptr<TCPStore> client;
  ServerAndClient() {
    TCPStoreOptions so;
    so.is_server = true;
    so.timeout = milliseconds(10000);
    server = std::make_unique<TCPStore>(so);
    TCPStoreOptions co = so;
    co.is_server = false;
    co.port = server->port();
    client = std::make_unique<TCPStore>(co);
    client->set("k", std::string("v"));
  }
};

// Destroys the server store on its own thread and returns how long that took; `meanwhile`
// runs on this thread as soon as the destruction has started.
template <typename Fn>
double destroy_server(ServerAndClient& s, Fn meanwhile) {
  const auto start = Clock::now();
  double took = -1;
  std::thread t([&] {
    s.server.reset();
    took = seconds_since(start);
  });
  meanwhile();
  t.join();
  return took;
}

TEST(StoreFarewell, WithoutAFailureTheStoreGoesAtOnce) {
  ServerAndClient s;
  const double took = destroy_server(s, [] {});
  EXPECT_LT(took, 0.5) << "no farewell when no failure was published";
  EXPECT_THROW(s.client->get("k"), StoreError);
}

TEST(StoreFarewell, AfterAFailureAClientThatStaysCostsTheWholeFarewellNeverMore) {
  ServerAndClient s;
  internal::note_failure_for_peers();
  const double took = destroy_server(s, [] {});
  EXPECT_GE(took, 0.9 * internal::kStoreFarewell.count() / 1000.0);
  EXPECT_LT(took, internal::kStoreFarewell.count() / 1000.0 + 1.0) << "bounded: never longer than the farewell";
}

TEST(StoreFarewell, AfterAFailureTheStoreServesUntilItsClientsLeave) {
  ServerAndClient s;
  internal::note_failure_for_peers();
  const double took = destroy_server(s, [&] {
    // Still served while its owner is going: the client reads what it came for, then leaves.
    EXPECT_EQ(s.client->get_string("k"), "v");
    s.client.reset();
  });
  EXPECT_LT(took, 0.9 * internal::kStoreFarewell.count() / 1000.0) << "it went once the client had left";
}

TEST(StoreFarewell, AStoreDestroyedWhileAnExceptionUnwindsServesAFarewell) {
  ServerAndClient s;
  const auto start = Clock::now();
  try {
    std::unique_ptr<TCPStore> server = std::move(s.server);
    throw Timeout("init timed out");
  } catch (const Timeout&) {
  }
  EXPECT_GE(seconds_since(start), 0.9 * internal::kStoreFarewell.count() / 1000.0);
}

}  // namespace
}  // namespace distcomm
