// The rendezvous endpoint's patient clients (launch/rendezvous_endpoint.h), in process, with
// real TCPStore servers and a listening socket that never answers (a stopped store process
// looks so to a client: the kernel completes the connection, nobody replies).
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "api/errors.h"
#include "api/store/server/tcp_store_server.h"
#include "launch/rendezvous_endpoint.h"

namespace distcomm {
namespace launch {
namespace {

using Clock = std::chrono::steady_clock;
constexpr char kToken[] = "the-job's-token";

std::unique_ptr<TCPStoreServer> serve(const std::string& rdzv_id, int port) {
  TCPStoreServerOptions options;
  options.bind_address = "127.0.0.1";
  options.port = port;
  options.identity = {"rdzv-" + rdzv_id, kToken};
  auto server = std::make_unique<TCPStoreServer>(options);
  server->start();
  return server;
}

// Listens at 127.0.0.1:port and never accepts: connections complete, requests go unanswered.
class SilentListener {
 public:
  explicit SilentListener(int port) : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    const int on = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0) << "port " << port;
    EXPECT_EQ(::listen(fd_, 64), 0);
  }
  ~SilentListener() { ::close(fd_); }

 private:
  int fd_;
};

ElasticOptions options_for(int port, std::chrono::seconds timeout) {
  ElasticOptions options;
  options.endpoint_host = "127.0.0.1";
  options.endpoint_port = port;
  options.rdzv_id = "endpoint-test";
  options.timeout = timeout;
  return options;
}

// The endpoint's server stops answering, then another job's store takes the port: the
// client's request fails with that refusal as soon as it is made, not after
// --rdzv_timeout_s of retrying it as if the store were still silent.
TEST(RendezvousEndpoint, AStoreThatAnswersWithARefusalAfterASilenceIsNotWaitedFor) {
  auto ours = serve("endpoint-test", 0);
  const int port = ours->port();
  RendezvousEndpoint endpoint(options_for(port, std::chrono::seconds(60)), kToken);
  ASSERT_FALSE(endpoint.serving());
  std::unique_ptr<Store> client = endpoint.connect([] { return false; });
  ASSERT_NE(client, nullptr);
  client->set("before", std::string("1"));

  ours->stop();
  ours.reset();
  auto silent = std::make_unique<SilentListener>(port);
  const auto asked = Clock::now();
  auto request = std::async(std::launch::async, [&] { client->get("before"); });
  // Long enough for at least one try to have gone unanswered.
  std::this_thread::sleep_for(std::chrono::seconds(4));
  silent.reset();
  auto theirs = serve("another-job", port);

  ASSERT_EQ(request.wait_for(std::chrono::seconds(30)), std::future_status::ready)
      << "the request was still being retried 30 s after another job's store answered";
  try {
    request.get();
    FAIL() << "the request succeeded against another job's store";
  } catch (const StoreRefused& e) {
    EXPECT_NE(std::string(e.what()).find("another job"), std::string::npos) << e.what();
  } catch (const std::exception& e) {
    FAIL() << "not a StoreRefused: " << e.what();
  }
  EXPECT_LT(Clock::now() - asked, std::chrono::seconds(15));
}

// A store that only does not answer is waited for, and its client's final error is a
// distcomm::Timeout (StoreSilent) that says for how long.
TEST(RendezvousEndpoint, AStoreSilentUntilTheTimeoutEndsInATimeout) {
  auto ours = serve("endpoint-test", 0);
  const int port = ours->port();
  RendezvousEndpoint endpoint(options_for(port, std::chrono::seconds(5)), kToken);
  std::unique_ptr<Store> client = endpoint.connect([] { return false; });
  ASSERT_NE(client, nullptr);
  ours->stop();
  ours.reset();
  SilentListener silent(port);
  const auto asked = Clock::now();
  try {
    client->get("anything");
    FAIL() << "a silent store answered";
  } catch (const Timeout& e) {
    EXPECT_NE(dynamic_cast<const StoreSilent*>(&e), nullptr) << e.what();
    EXPECT_NE(std::string(e.what()).find("has not answered for"), std::string::npos) << e.what();
  }
  // One try past the 5 s deadline at most (3 s a try).
  EXPECT_LT(Clock::now() - asked, std::chrono::seconds(10));
}

// Two clients of one endpoint wait for a silent store; the first to reach the timeout gives
// up for all, and the other's request ends too -- with the same StoreSilent and the true
// reason, not the raw error of its last try (read by the agent and the round watch as
// nothing listening at the endpoint: "its launcher ended?", while it still ran).
TEST(RendezvousEndpoint, EveryClientOfASilentStoreGetsTheTimeoutsReason) {
  auto ours = serve("endpoint-test", 0);
  const int port = ours->port();
  RendezvousEndpoint endpoint(options_for(port, std::chrono::seconds(4)), kToken);
  std::unique_ptr<Store> first = endpoint.connect([] { return false; });
  ASSERT_NE(first, nullptr);
  std::unique_ptr<Store> second = endpoint.connect_again();
  ours->stop();
  ours.reset();
  SilentListener silent(port);
  const auto asked = Clock::now();
  auto first_request = std::async(std::launch::async, [&] { first->get("anything"); });
  // Later, so that its own timeout comes after the first client's.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  auto second_request = std::async(std::launch::async, [&] { second->get("anything"); });
  for (auto* request : {&first_request, &second_request}) {
    ASSERT_EQ(request->wait_for(std::chrono::seconds(20)), std::future_status::ready);
    try {
      request->get();
      ADD_FAILURE() << "a silent store answered";
    } catch (const StoreSilent& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("the rendezvous store at 127.0.0.1:" + std::to_string(port) + " has not answered for "),
                std::string::npos)
          << what;
      EXPECT_NE(what.find("(--rdzv_timeout_s=4s)"), std::string::npos) << what;
      EXPECT_EQ(what.find("leaving"), std::string::npos) << what;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not a StoreSilent: " << e.what();
    }
  }
  // The second gave up with the first, one try after the timeout at most (3 s a try).
  EXPECT_LT(Clock::now() - asked, std::chrono::seconds(10));
}

// A launcher that is leaving (give_up_retrying) asks a silent store once: its request ends
// within one try, as a StoreSilent that says why it was not asked again.
TEST(RendezvousEndpoint, ALeavingLauncherAsksASilentStoreOnce) {
  auto ours = serve("endpoint-test", 0);
  const int port = ours->port();
  RendezvousEndpoint endpoint(options_for(port, std::chrono::seconds(60)), kToken);
  std::unique_ptr<Store> client = endpoint.connect([] { return false; });
  ASSERT_NE(client, nullptr);
  ours->stop();
  ours.reset();
  SilentListener silent(port);
  endpoint.give_up_retrying();
  const auto asked = Clock::now();
  try {
    client->get("anything");
    FAIL() << "a silent store answered";
  } catch (const StoreSilent& e) {
    EXPECT_NE(std::string(e.what()).find("this launcher is leaving"), std::string::npos) << e.what();
  } catch (const std::exception& e) {
    FAIL() << "not a StoreSilent: " << e.what();
  }
  EXPECT_LT(Clock::now() - asked, std::chrono::seconds(5));
}

}  // namespace
}  // namespace launch
}  // namespace distcomm
