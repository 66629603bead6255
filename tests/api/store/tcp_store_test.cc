// TCPStore and its server: connecting, failing, big values, waiting for workers, and
// clients that break the protocol. Identity and limits: tcp_store_auth_test.cc,
// tcp_store_limits_test.cc.
#include <gtest/gtest.h>

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <chrono>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>
#include <tuple>

#include "api/errors.h"
#include "api/store/internal/call_deadline.h"
#include "api/store/internal/store_handshake.h"
#include "api/store/tcp_store.h"
#include "tests/api/store/store_test_util.h"
#include "tests/testing/forked_store_server.h"

namespace distcomm {
namespace {

using namespace std::chrono_literals;
using namespace testing;
using Bytes = Store::Bytes;

TCPStoreServerOptions on_port(int port) {
  TCPStoreServerOptions o;
  o.port = port;
  return o;
}


TEST(TCPStoreTest, ServerPicksAPortAndAStandaloneServerServesClients) {
  TCPStoreServer server;
  server.start();
  ASSERT_GT(server.port(), 0);
  EXPECT_TRUE(server.running());
  TCPStore a(client_of(server.port())), b(client_of(server.port()));
  a.set("k", "v");
  EXPECT_EQ(b.get_string("k"), "v");
  EXPECT_EQ(a.port(), server.port());
  EXPECT_THROW(server.start(), StoreError);
  // Over the server's limits: refused before sending, and the connection stays usable.
  EXPECT_THROW(a.set(std::string(70000, 'k'), "v"), InvalidArgument);
  EXPECT_EQ(a.get_string("k"), "v");
}

TEST(TCPStoreTest, ConnectFailureNamesTheAddressAndTheOsError) {
  const int port = unused_port();
  const auto [message, took] = error_of<StoreError>([&] { TCPStore s(client_of(port, 300ms)); });
  EXPECT_NE(message.find("cannot connect to 127.0.0.1:" + std::to_string(port) + " after 300 ms"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("Connection refused"), std::string::npos) << message;
  EXPECT_LT(took, 2s);
  EXPECT_THROW(TCPStore(client_of(0)), InvalidArgument);
}

TEST(TCPStoreTest, ClientRetriesUntilTheServerStarts) {
  const int port = unused_port();
  TCPStoreServer server(on_port(port));
  std::thread late([&] {
    std::this_thread::sleep_for(300ms);
    server.start();
  });
  TCPStore s(client_of(port));
  late.join();
  s.set("k", "v");
  EXPECT_EQ(s.get_string("k"), "v");
}

TEST(TCPStoreTest, ServerGoneIsAStoreErrorNotAHang) {
  TCPStoreServer server;
  server.start();
  TCPStore s(client_of(server.port()));
  s.set("k", "v");
  std::thread stopper([&] {
    std::this_thread::sleep_for(100ms);
    server.stop();
  });
  // A get parked on the server when it stops.
  const auto [message, took] = error_of<StoreError>([&] { s.get("never"); });
  EXPECT_NE(message.find("closed the connection"), std::string::npos) << message;
  stopper.join();
  // Reconnecting to a server that closed this store's connection gets one short try, and
  // once that fails every later call fails at once (a group's teardown makes several).
  EXPECT_LT(time_of([&] { EXPECT_THROW(s.set("k", "v"), StoreError); }), 500ms);
  const auto [again, took_again] = error_of<StoreError>([&] { s.get("k"); });
  EXPECT_LT(took_again, 50ms);
  EXPECT_NE(again.find("taken as gone"), std::string::npos) << again;
}

// A server whose process is stopped (SIGSTOP: a debugger, a frozen container) answers
// nothing: the client says so, rather than that it waited for a key, which existed (a
// review: "timed out after 2 s waiting for key 'k'; check that the rank that sets it is
// running").
TEST(TCPStoreTest, AStoppedServerIsNamedNotTheKey) {
  testing::ForkedStoreServer server;
  TCPStore s(client_of(server.port(), 1000ms));
  s.set("k", "v");
  server.stop();
  const auto [message, took] = error_of<Timeout>([&] { s.get("k"); });
  EXPECT_NE(message.find("sent no reply to GET"), std::string::npos) << message;
  EXPECT_NE(message.find("is its process stopped"), std::string::npos) << message;
  EXPECT_EQ(message.find("waiting for key"), std::string::npos) << message;
  EXPECT_LT(took, 10s);
}

TEST(TCPStoreTest, LargeValuesRoundTrip) {
  TCPStore server([] {
    TCPStoreOptions o;
    o.is_server = true;
    o.timeout = kTestTimeout;
    return o;
  }());
  TCPStore c(client_of(server.port()));
  Bytes big(24 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 31 + 7);
  c.set("big", big);
  EXPECT_EQ(server.get("big"), big);
  EXPECT_EQ(c.compare_set("big", big, Bytes{1}), Bytes{1});
}

TEST(TCPStoreTest, WaitForWorkers) {
  const int port = unused_port();
  TCPStoreOptions o;
  o.port = port;
  o.is_server = true;
  o.num_workers = 3;
  o.wait_for_workers = true;
  o.timeout = kTestTimeout;
  std::thread workers([&] {
    std::this_thread::sleep_for(100ms);
    TCPStoreOptions w = client_of(port);
    w.num_workers = 3;
    TCPStore a(w), b(w);
    a.wait({"server_ready"});
  });
  TCPStore server(o);  // returns once both workers counted themselves in
  EXPECT_EQ(server.add("init/", 0), 3);
  server.set("server_ready", "");
  workers.join();

  o.port = 0;
  o.num_workers = 2;
  o.timeout = 300ms;
  const auto [message, took] = error_of<Timeout>([&] { TCPStore alone(o); });
  EXPECT_NE(message.find("only 1 of 2 workers"), std::string::npos) << message;
  EXPECT_ENDED_AT_TIMEOUT(took, 300ms);
}

TEST(TCPStoreTest, HostileClientsAreDisconnectedWhileOthersAreServed) {
  const JobIdentity id = new_job_identity();
  TCPStoreServerOptions so;
  so.identity = id;
  TCPStoreServer server(so);
  server.start();
  const int port = server.port();
  // Well-behaved ranks keep adding in other processes until the hostile clients are done.
  constexpr int kProcs = 3;
  Children ranks(kProcs, [&](int rank) {
    TCPStore s(client_of(port, kTestTimeout, id));
    s.add("started", 1);
    int64_t mine = 0;
    while (!s.check({"hostile_done"})) {
      s.add("counter", 1);
      ++mine;
    }
    s.set("count" + std::to_string(rank), std::to_string(mine));
  });
  TCPStore check(client_of(port, kTestTimeout, id));
  while (check.add("started", 0) < kProcs) std::this_thread::sleep_for(5ms);

  constexpr uint8_t kHello = 9, kProve = 10;
  const std::string nonce(32, 'n');
  // Strangers: anything but a well-formed HELLO is closed at once.
  const std::vector<std::pair<std::string, std::string>> before_handshake = {
      {"a SET before the handshake", request(kSet, {"k", "v"})},
      {"unknown command", std::string(1, '\0') + "xyz"},
      {"a HELLO over 1 KiB", request(kHello, {internal::kHandshakeMagic, std::string(2000, 'r'), nonce})},
      {"a HELLO that declares 200 MiB", std::string(1, kHello) + u32(3) + u32(200u << 20)},
      {"a HELLO of another protocol", request(kHello, {"redis", "", nonce})},
      {"a HELLO with a short nonce", request(kHello, {internal::kHandshakeMagic, "", "n"})},
      {"a PROVE before HELLO", request(kProve, {std::string(32, 'p')})},
  };
  for (const auto& [what, bytes] : before_handshake) {
    RawClient raw(port);
    raw.send_bytes(bytes);
    EXPECT_TRUE(raw.closed_by_server()) << what;
  }
  // Clients that know the token and then break the protocol.
  const std::vector<std::pair<std::string, std::string>> after_handshake = {
      {"unknown command", std::string(1, '\0') + "xyz"},
      {"command 255", std::string(1, '\xff')},
      {"a second HELLO", request(kHello, {internal::kHandshakeMagic, id.run_id, nonce})},
      {"4 GiB field", std::string(1, kSet) + u32(2) + u32(0xffffffffu)},
      {"a field over the server's 64 MiB", std::string(1, kSet) + u32(2) + u32((64u << 20) + 1)},
      {"4 billion fields", std::string(1, kGet) + u32(0xffffffffu)},
      {"key over 64 KiB", request(kSet, {std::string(70000, 'k'), "v"})},
      {"GET with two fields", request(kGet, {"a", "b"})},
      {"ADD with a 3-byte delta", request(kAdd, {"counter", "abc"})},
  };
  for (const auto& [what, bytes] : after_handshake) {
    RawClient raw(port);
    raw.handshake(id);
    raw.send_bytes(bytes);
    EXPECT_TRUE(raw.closed_by_server()) << what;
  }

  // Random bytes and truncated messages, closed by the client before they complete, from
  // strangers and from clients through the handshake.
  std::mt19937 rng(1234);
  for (int i = 0; i < 200; ++i) {
    RawClient raw(port);
    if (i % 4 >= 2) raw.handshake(id);
    std::string junk(1 + rng() % 300, '\0');
    for (auto& ch : junk) ch = static_cast<char>(rng());
    if (i % 2) junk = request(kSet, {"key", std::string(1000, 'v')}).substr(0, rng() % 1000);
    raw.send_bytes(junk);
  }
  // A client that stalls mid-message holds only its own connection.
  RawClient stalled(port);
  stalled.handshake(id);
  stalled.send_bytes(request(kSet, {"stalled", "value"}).substr(0, 7));

  check.set("hostile_done", "");
  EXPECT_EQ(ranks.join(), "");
  int64_t total = 0;
  for (int r = 0; r < kProcs; ++r) {
    total += std::stoll(check.get_string("count" + std::to_string(r)));
  }
  EXPECT_GT(total, 0);
  EXPECT_EQ(check.add("counter", 0), total);
  EXPECT_FALSE(check.check({"stalled"}));
}

TEST(TCPStoreTest, AClientThatTimedOutDoesNotDisturbOtherWaiters) {
  TCPStoreServer server;
  server.start();
  TCPStore impatient(client_of(server.port())), patient(client_of(server.port()));
  std::thread waiter([&] { EXPECT_EQ(patient.get_string("slow"), "finally"); });
  impatient.set_timeout(100ms);
  EXPECT_THROW(impatient.get("slow"), Timeout);
  TCPStore(client_of(server.port())).set("slow", "finally");
  waiter.join();
  // The timed-out client reconnects and sees the value.
  EXPECT_EQ(impatient.get_string("slow"), "finally");
}

// The local ports of this process's established connections to a server port on this
// host, from /proc/self/net/tcp{,6}: which connection a TCPStore client is using.
std::vector<int> connections_to(int server_port) {
  std::vector<int> ports;
  for (const char* table : {"/proc/self/net/tcp", "/proc/self/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state;
      fields >> slot >> local >> remote >> state;
      const auto port_of = [](const std::string& address) {
        return std::stoi(address.substr(address.rfind(':') + 1), nullptr, 16);
      };
      if (state == "01" && port_of(remote) == server_port) ports.push_back(port_of(local));
    }
  }
  return ports;
}

// A wait that times out is ended by the server (WAIT_FOR): the client keeps its
// connection, so polling in slices (every init phase does) costs no reconnect and no
// handshake. Before, each timed-out slice closed the connection and opened a new one,
// which at 96 ranks on 2 cores made the server slow enough to be taken for gone.
TEST(TCPStoreTest, AWaitThatTimesOutKeepsItsConnection) {
  TCPStoreServer server;
  server.start();
  TCPStore client(client_of(server.port()));
  client.set("here", "1");
  const std::vector<int> before = connections_to(server.port());
  ASSERT_EQ(before.size(), 1u) << "one client connection to the server";
  for (int i = 0; i < 3; ++i) {
    const auto start = std::chrono::steady_clock::now();
    try {
      client.wait({"here", "missing"}, 100ms);
      ADD_FAILURE() << "the wait should time out";
    } catch (const Timeout& e) {
      EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find("here"), std::string::npos) << "only the missing key is named: " << e.what();
    }
    EXPECT_GE(std::chrono::steady_clock::now() - start, 90ms);
  }
  EXPECT_EQ(connections_to(server.port()), before) << "the same connection, not a new one";
  // It is in step: the next requests get their own replies.
  std::thread setter([&] {
    std::this_thread::sleep_for(50ms);
    TCPStore(client_of(server.port())).set("missing", "now");
  });
  client.wait({"here", "missing"}, 10s);
  setter.join();
  EXPECT_EQ(client.get_string("missing"), "now");
  EXPECT_EQ(connections_to(server.port()), before);
}

// WAIT_FOR on the wire: the reply is 1 once every key exists; when the server's clock ran
// out first, 0 and then a byte per key (1: it exists); the connection serves the next
// request either way.
TEST(TCPStoreTest, TheServerEndsAWaitForAtItsTimeout) {
  TCPStoreServer server;
  server.start();
  RawClient raw(server.port());
  raw.handshake();
  constexpr uint8_t kWaitFor = 11;
  const auto ms = [](int64_t v) {
    std::string b(8, '\0');
    for (int i = 0; i < 8; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xff);
    return b;
  };
  // Reads one reply: status, then its payload.
  const auto reply = [&](std::chrono::milliseconds limit) {
    std::string got;
    const auto until = std::chrono::steady_clock::now() + limit;
    while (got.size() < 5 || got.size() < 5 + static_cast<size_t>(static_cast<uint8_t>(got[1]))) {
      pollfd p{raw.fd(), POLLIN, 0};
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
      if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) <= 0) return std::string("no reply");
      char buf[256];
      const ssize_t n = recv(raw.fd(), buf, sizeof buf, 0);
      if (n <= 0) return std::string("closed");
      got.append(buf, static_cast<size_t>(n));
    }
    return got;
  };
  const auto start = std::chrono::steady_clock::now();
  raw.send_bytes(request(kWaitFor, {ms(200), "k"}));
  EXPECT_EQ(reply(5s), std::string("\0\2\0\0\0\0\0", 7)) << "status ok, 2 bytes: 0 (not yet), key 'k' missing";
  EXPECT_GE(std::chrono::steady_clock::now() - start, 190ms);
  raw.send_bytes(request(kWaitFor, {ms(10000), "k"}));
  TCPStore(client_of(server.port())).set("k", "v");
  EXPECT_EQ(reply(5s), std::string("\0\1\0\0\0\1", 6)) << "one byte: 1, every key exists";
  raw.send_bytes(request(kGet, {"k"}));
  EXPECT_EQ(reply(5s), std::string("\0\1\0\0\0v", 6));
  // A WAIT_FOR without its 8-byte timeout is refused and the connection closed.
  raw.send_bytes(request(kWaitFor, {"k"}));
  EXPECT_TRUE(raw.closed_by_server());
}

// A call waits for the connection, which the process's threads share, by its own bound: a
// thread behind another's request that the server does not answer (its process stopped)
// must not wait for that request's timeout (a stall watch's call, say, behind which a
// shrink with a short timeout would otherwise wait the store's 30 minutes).
TEST(TCPStoreTest, ACallBehindAnUnansweredRequestWaitsByItsOwnBound) {
  testing::ForkedStoreServer server;
  TCPStore s(client_of(server.port(), 60s));
  s.set("k", "v");
  server.stop();
  std::thread first([&] { EXPECT_THROW(s.add("n", 1), Error); });
  std::this_thread::sleep_for(1s);  // first's request is sent and waits
  const auto [message, took] = error_of<Timeout>([&] { s.wait({"k"}, 500ms); });
  EXPECT_NE(message.find("stayed busy with another thread's request for the 2 s this WAIT_FOR could wait"),
            std::string::npos)
      << message;
  EXPECT_LT(took, 5s);
  server.kill();  // first's call fails now
  first.join();
}

// Within a StoreCallDeadline, every call ends by the scope's deadline, whatever the store's
// timeout; one begun after it throws at once, naming the scope, and sends nothing.
TEST(TCPStoreTest, ACallDeadlineBoundsEveryCallOfItsThread) {
  testing::ForkedStoreServer server;
  TCPStore s(client_of(server.port(), 60s));
  s.set("k", "v");
  {
    internal::StoreCallDeadline passed(std::chrono::steady_clock::now() - 1ms, "the test's first scope");
    const auto [message, took] = error_of<Timeout>([&] { s.get("k"); });
    EXPECT_NE(message.find("store GET not made: the deadline of the test's first scope has passed"),
              std::string::npos)
        << message;
  }
  EXPECT_EQ(s.get_string("k"), "v");  // nothing was sent: the connection is in step
  server.stop();
  {
    internal::StoreCallDeadline bounded(std::chrono::steady_clock::now() + 500ms, "the test's scope");
    // An inner scope cannot lengthen the outer one.
    internal::StoreCallDeadline inner(std::chrono::steady_clock::now() + 60s, "an inner scope");
    const auto [add_error, add_took] = error_of<Timeout>([&] { s.add("n", 1); });
    EXPECT_LT(add_took, 3s) << add_error;
    const auto [wait_error, wait_took] = error_of<Error>([&] { s.wait({"missing"}, 30s); });
    EXPECT_NE(wait_error.find("the test's scope has passed"), std::string::npos) << wait_error;
    EXPECT_LT(wait_took, 1s) << wait_error;
  }
  server.kill();
}

// A wait bounded by a scope tells the server the shorter timeout: the server ends it then
// (told 30 s, it would answer only after the client had given up, 2 s after the scope).
// The local ports of this process's TCP connections to `port` on 127.0.0.1: a connection
// that was closed and opened again shows as a new port.
std::vector<int> local_ports_of_connections_to(int port) {
  std::vector<int> ports;
  for (int fd = 0; fd < 4096; ++fd) {
    sockaddr_in peer{}, self{};
    socklen_t n = sizeof peer, m = sizeof self;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &n) != 0 || peer.sin_family != AF_INET) continue;
    if (ntohs(peer.sin_port) != port) continue;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&self), &m) != 0) continue;
    ports.push_back(ntohs(self.sin_port));
  }
  return ports;
}

// A wait() for key "missing" in a scope named "the test's scope" ended by that scope.
void expect_a_wait_for_missing_cut_short_by_the_test(const std::string& error, std::chrono::milliseconds took,
                                                     std::chrono::milliseconds within) {
  EXPECT_NE(error.find("'missing'"), std::string::npos) << error;
  EXPECT_NE(error.find("what was left before the deadline of the test's scope"), std::string::npos) << error;
  EXPECT_LT(took, within) << error;
}

// s (which set "k" to "v") still answers over the connection it had (local port `before`).
void expect_the_same_connection_still_answers(TCPStore& s, int port, const std::vector<int>& before) {
  EXPECT_EQ(s.get_string("k"), "v");
  EXPECT_EQ(local_ports_of_connections_to(port), before) << "the wait cost a reconnect";
}

TEST(TCPStoreTest, AWaitBoundedByACallDeadlineEndsThenAndKeepsItsConnection) {
  testing::ForkedStoreServer server;
  TCPStore s(client_of(server.port(), 60s));
  s.set("k", "v");
  const std::vector<int> before = local_ports_of_connections_to(server.port());
  ASSERT_EQ(before.size(), 1u);
  {
    internal::StoreCallDeadline bounded(std::chrono::steady_clock::now() + 400ms, "the test's scope");
    // The server answered "not yet" by the deadline: a plain Timeout (a StoreCallCutShort
    // would say the store did not answer), naming the scope that shortened the wait.
    bool cut_short = false;
    const auto [wait_error, wait_took] = error_of<Timeout>([&] {
      try {
        s.wait({"missing"}, 30s);
      } catch (const internal::StoreCallCutShort&) {
        cut_short = true;
        throw;
      }
    });
    EXPECT_FALSE(cut_short) << wait_error;
    expect_a_wait_for_missing_cut_short_by_the_test(wait_error, wait_took, 2s);
  }
  expect_the_same_connection_still_answers(s, server.port(), before);
}

// A wait that queued behind another thread's request still ends by its call deadline: the
// server is told what is left after the queue, not what was left before it (which had the
// live server blamed for not answering, and the connection closed, 2 s past the deadline).
TEST(TCPStoreTest, AWaitThatQueuedBehindAnotherRequestStillEndsByItsCallDeadline) {
  testing::ForkedStoreServer server;
  TCPStore s(client_of(server.port(), 60s));
  s.set("k", "v");
  const std::vector<int> before = local_ports_of_connections_to(server.port());
  std::thread other([&] { EXPECT_THROW(s.wait({"never"}, 2500ms), Timeout); });
  std::this_thread::sleep_for(200ms);  // the other wait holds the connection now
  std::string wait_error;
  std::chrono::milliseconds wait_took{};
  {
    internal::StoreCallDeadline bounded(std::chrono::steady_clock::now() + 3500ms, "the test's scope");
    // Any Timeout: a test thread must not leave with `other` still running.
    std::tie(wait_error, wait_took) = error_of<Timeout>([&] { s.wait({"missing"}, 30s); });
  }
  other.join();
  expect_a_wait_for_missing_cut_short_by_the_test(wait_error, wait_took, 3500ms + 300ms);
  expect_the_same_connection_still_answers(s, server.port(), before);
}

// A reconnect the call deadline cuts short is the caller's Timeout: the store is not taken
// as gone, and the next call, outside the scope, works.
TEST(TCPStoreTest, AReconnectTheCallDeadlineCutsShortDoesNotMarkTheStoreGone) {
  testing::ForkedStoreServer server;
  TCPStore s(client_of(server.port(), 60s));
  s.set("k", "v");
  server.stop();
  {
    // The GET is cut short (its connection is closed: a late answer would be out of step).
    internal::StoreCallDeadline bounded(std::chrono::steady_clock::now() + 300ms, "the test's scope");
    EXPECT_THROW(s.get("k"), internal::StoreCallCutShort);
  }
  {
    // The reconnect meets a server that accepts (the kernel does) and never says hello.
    internal::StoreCallDeadline bounded(std::chrono::steady_clock::now() + 300ms, "the test's scope");
    bool cut_short = false;
    const auto [error, took] = error_of<Timeout>([&] {
      try {
        s.get("k");
      } catch (const internal::StoreCallCutShort&) {
        cut_short = true;
        throw;
      }
    });
    EXPECT_TRUE(cut_short) << error;
    EXPECT_NE(error.find("what was left before the deadline of the test's scope"), std::string::npos) << error;
    EXPECT_LT(took, 1500ms) << error;
  }
  server.cont();
  EXPECT_EQ(s.get_string("k"), "v");
}

}  // namespace
}  // namespace distcomm
