// The TCPStore server's bounds: deadlines for connections that stall, caps on
// connections, and one budget for the bytes it buffers, while the job's own requests go on.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>

#include "api/errors.h"
#include "api/store/internal/store_handshake.h"
#include "api/store/tcp_store.h"
#include "tests/api/store/store_test_util.h"

namespace distcomm {
namespace {

using namespace std::chrono_literals;
using namespace testing;
using Bytes = Store::Bytes;

constexpr size_t kMiB = size_t{1} << 20;

TCPStoreOptions limited(const JobIdentity& id, const TCPStoreLimits& limits) {
  TCPStoreOptions o = server_of(id);
  o.limits = limits;
  return o;
}

// Sends s one byte every `pause` until the server hangs up (or s runs out, or 5 s pass);
// returns how long after the first byte that was.
std::chrono::milliseconds trickle_until_closed(RawClient& raw, const std::string& s, std::chrono::milliseconds pause) {
  const auto start = Clock::now();
  for (const char c : s) {
    raw.send_bytes(std::string(1, c));
    if (raw.hung_up(pause) || Clock::now() - start > 5s) break;
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
}

TEST(Limits, DefaultCapsScaleWithTheWorld) {
  const TCPStoreLimits four = resolve_limits({}, 4);
  EXPECT_EQ(four.max_connections, 24);
  EXPECT_EQ(four.max_pending, 68);
  EXPECT_EQ(four.max_buffered_bytes, 64 * kMiB);
  const TCPStoreLimits unknown = resolve_limits({}, -1);
  EXPECT_EQ(unknown.max_connections, 1024);
  EXPECT_EQ(unknown.max_pending, 256);
  TCPStoreLimits zero_deadline;
  zero_deadline.transfer_deadline = 0ms;
  EXPECT_THROW(resolve_limits(zero_deadline, 4), InvalidArgument);
}

TEST(Limits, AConnectionStillInTheHandshakeAtItsDeadlineIsClosed) {
  const JobIdentity id = new_job_identity();
  TCPStoreLimits limits;
  limits.handshake_deadline = 500ms;
  TCPStore server(limited(id, limits));
  TCPStore rank(client_of(server.port(), kTestTimeout, id));
  const auto start = Clock::now();
  RawClient idle(server.port());
  RawClient slow(server.port());
  // A HELLO at 20 bytes a second, then silence: both are closed at the deadline.
  const std::string hello = request(9, {internal::kHandshakeMagic, id.run_id, std::string(32, 'n')});
  const auto slow_took = trickle_until_closed(slow, hello, 50ms);
  EXPECT_TRUE(idle.hung_up(3s));
  const auto idle_took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  EXPECT_GE(slow_took, 450ms);  // its first byte left a moment after it connected
  EXPECT_LT(slow_took, 2500ms);
  EXPECT_GE(idle_took, 500ms);
  EXPECT_LT(idle_took, 2500ms);
  // A connection through the handshake may idle for as long as it likes.
  EXPECT_NO_THROW(rank.set("after", "the deadline"));
}

TEST(Limits, APartialRequestIsClosedAtItsDeadlineWhileWaitsAndIdlersStay) {
  const JobIdentity id = new_job_identity();
  TCPStoreLimits limits;
  limits.transfer_deadline = 500ms;
  TCPStore server(limited(id, limits));
  TCPStore idler(client_of(server.port(), kTestTimeout, id));
  TCPStore waiter(client_of(server.port(), kTestTimeout, id));
  std::string got;
  std::thread waiting([&] {  // parked on the server
    try {
      got = waiter.get_string("late");
    } catch (const std::exception& e) {
      got = e.what();
    }
  });

  RawClient slowloris(server.port());
  slowloris.handshake(id);
  const auto took = trickle_until_closed(slowloris, request(kSet, {"k", std::string(1000, 'v')}), 50ms);
  EXPECT_GE(took, 500ms);
  EXPECT_LT(took, 2500ms);

  // Set well after the deadline: the parked get() was not closed for waiting that long.
  std::this_thread::sleep_for(300ms);
  server.set("late", "value");
  waiting.join();
  EXPECT_EQ(got, "value");
  EXPECT_NO_THROW(idler.set("still", "open"));
}

TEST(Limits, AClientThatDoesNotReadItsReplyIsClosedAtTheDeadline) {
  const JobIdentity id = new_job_identity();
  TCPStoreLimits limits;
  // Long enough that the test's own 32 MiB SET gets through it on a loaded machine.
  limits.transfer_deadline = 2s;
  TCPStore server(limited(id, limits));
  server.set("big", Bytes(32 * kMiB, 7));  // more than the kernel's socket buffers hold
  RawClient reader(server.port());
  reader.handshake(id);
  const auto start = Clock::now();
  reader.send_bytes(request(kGet, {"big"}));
  EXPECT_TRUE(reader.hung_up(10s));
  const auto took = Clock::now() - start;
  EXPECT_GE(took, 2s);
  EXPECT_LT(took, 2s + 2500ms);
  // The store goes on serving, and still holds the value. (Not by reading the 32 MiB back:
  // that reply has the same 2 s deadline, which a loaded machine can miss.)
  EXPECT_TRUE(server.check({"big"}));
  server.set("after", "x");
  EXPECT_EQ(server.get_string("after"), "x");
}

TEST(Limits, PastTheConnectionCapANewcomerIsRefusedAndTheEstablishedStay) {
  const JobIdentity id = new_job_identity();
  TCPStoreLimits limits;
  limits.max_connections = 3;  // the server's own store holds one
  TCPStore server(limited(id, limits));
  TCPStore a(client_of(server.port(), kTestTimeout, id));
  auto b = std::make_unique<TCPStore>(client_of(server.port(), kTestTimeout, id));
  const auto [message, took] =
      error_of<StoreError>([&] { TCPStore c(client_of(server.port(), kTestTimeout, id)); });
  EXPECT_NE(message.find("refused this connection: the store already holds 3 connections of this job"),
            std::string::npos)
      << message;
  EXPECT_LT(took, kAtOnce);
  // Not a StoreRefused: once a connection closes the same request gets in (below), so a
  // client that retries a StoreError (the rendezvous' patient clients) must retry this one.
  try {
    TCPStore c(client_of(server.port(), kTestTimeout, id));
    ADD_FAILURE() << "admitted past the cap";
  } catch (const StoreRefused& e) {
    ADD_FAILURE() << "a refusal for the cap is a StoreRefused: " << e.what();
  } catch (const StoreError&) {
  }
  a.set("k", "v");
  EXPECT_EQ(b->get_string("k"), "v");
  EXPECT_EQ(server.get_string("k"), "v");
  // A connection closed makes room (once the server has seen it close).
  b.reset();
  const auto deadline = Clock::now() + 5s;
  std::unique_ptr<TCPStore> d;
  while (!d) {
    try {
      d = std::make_unique<TCPStore>(client_of(server.port(), kTestTimeout, id));
    } catch (const StoreError& e) {
      ASSERT_LT(Clock::now(), deadline) << e.what();
      std::this_thread::sleep_for(10ms);
    }
  }
  EXPECT_EQ(d->get_string("k"), "v");
}

TEST(Limits, AtThePendingCapTheOldestHandshakeIsClosedAndARankStillGetsIn) {
  const JobIdentity id = new_job_identity();
  TCPStoreLimits limits;
  limits.max_pending = 8;
  TCPStore server(limited(id, limits));
  std::vector<std::unique_ptr<RawClient>> crowd;
  for (int i = 0; i < 30; ++i) crowd.push_back(std::make_unique<RawClient>(server.port()));
  // The oldest 22 are closed to make room for the newer ones.
  for (int i = 0; i < 22; ++i) EXPECT_TRUE(crowd[i]->hung_up(3s)) << i;
  // A rank arriving now closes one more and is served at once.
  const auto took = time_of([&] {
    TCPStore rank(client_of(server.port(), kTestTimeout, id));
    rank.set("in", "yes");
  });
  EXPECT_LT(took, kAtOnce);
  EXPECT_TRUE(crowd[22]->hung_up(3s));
  for (int i = 23; i < 30; ++i) EXPECT_FALSE(crowd[i]->hung_up(10ms)) << i;
}

TEST(Limits, AReadPresentWhoseReplyCouldNeverFitIsRefusedAndTheConnectionGoesOn) {
  const JobIdentity id = new_job_identity();
  TCPStoreLimits limits;
  limits.max_buffered_bytes = 4 * kMiB;
  TCPStore server(limited(id, limits));
  TCPStore rank(client_of(server.port(), kTestTimeout, id));
  const Bytes value(3 * kMiB / 2, 'v');
  for (const char* k : {"a", "b", "c"}) rank.set(k, value);
  // Each value fits; the three together (4.5 MiB) never could: an error at once, not a wait.
  std::string message;
  const auto took = time_of([&] { message = error_of<StoreError>([&] { read_present(rank, {"a", "b", "c"}); }).first; });
  EXPECT_LT(took, 2s);
  EXPECT_NE(message.find("GET_PRESENT's reply (4718607 bytes for 3 keys) exceeds the server's limit of 4194304"),
            std::string::npos)
      << message;
  EXPECT_EQ(read_present(rank, {"a", "b"}), (std::vector<std::optional<Bytes>>{value, value}));
}

TEST(Limits, RequestsBeyondTheBufferBudgetWaitForRoomWhileSmallOnesGoOn) {
  const JobIdentity id = new_job_identity();
  TCPStoreLimits limits;
  limits.max_buffered_bytes = 4 * kMiB;
  limits.transfer_deadline = 1s;
  TCPStore server(limited(id, limits));
  TCPStore rank(client_of(server.port(), kTestTimeout, id));
  // Over the budget: refused before a byte is sent, naming the limit.
  const auto [message, took] = error_of<InvalidArgument>([&] { rank.set("huge", Bytes(5 * kMiB)); });
  EXPECT_NE(message.find("over the limit of 4194304 of the store at 127.0.0.1:" + std::to_string(server.port())),
            std::string::npos)
      << message;
  // Whose limit: the server's, which the launcher runs under distcomm-launch (it said
  // "on rank 0" there too).
  EXPECT_NE(message.find("(TCPStoreLimits::max_buffered_bytes of the process that serves the store: rank 0's, or "
                         "under distcomm-launch or spawn() the launcher's)"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find("on rank 0"), std::string::npos) << message;

  // A client with the token starts a 3 MiB SET and stalls: it holds 3 MiB of the budget.
  RawClient hog(server.port());
  hog.handshake(id);
  const std::string set = request(kSet, {"hog", std::string(3 * kMiB, 'h')});
  const auto hog_start = Clock::now();
  hog.send_bytes(set.substr(0, kMiB));
  rank.num_keys();  // a round trip: the server has read the hog's header
  // Small requests do not wait for the budget.
  EXPECT_LT(time_of([&] { rank.add("small", 1); }), 500ms);
  // A rank's 3 MiB SET waits for room until the hog's deadline closes it, then completes.
  const Bytes value(3 * kMiB, 'r');
  rank.set("value", value);
  const auto waited = Clock::now() - hog_start;
  EXPECT_GE(waited, 1s);
  EXPECT_LT(waited, 6s);
  EXPECT_TRUE(hog.hung_up(0ms));
  EXPECT_EQ(server.get("value"), value);
  EXPECT_FALSE(server.check({"hog"}));
}

}  // namespace
}  // namespace distcomm
