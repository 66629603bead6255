// TCPStore::cut_off: a client that knows its server is out of reach ends its use of the
// store, so that what it still asks on its way out fails at once instead of waiting each
// call's own bound. Found on an ft member whose host's link was cut: once it had taken
// itself for lost, its group's teardown and a commit under way each still waited for the
// silent store (3 s apiece; a commit's ADD, the op timeout), so that the member ended
// 12-43 s after the cut where its monitor had judged it in 3.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "api/errors.h"
#include "api/store/tcp_store.h"
#include "tests/api/store/store_test_util.h"
#include "tests/testing/forked_store_server.h"

namespace distcomm {
namespace {

using namespace std::chrono_literals;
using namespace testing;

// A request under way on a server that answers nothing (stopped), and one queued behind it
// on another thread, both end at once when the client is cut off, with its why.
TEST(TCPStoreCutOff, ARequestUnderWayAndOneQueuedBehindItFailAtOnce) {
  ForkedStoreServer server;
  TCPStore s(client_of(server.port(), 20s));
  s.set("k", "v");
  server.stop();
  std::string under_way, queued;
  std::atomic<int64_t> under_way_ended_ms{-1}, queued_ended_ms{-1};
  const auto start = std::chrono::steady_clock::now();
  auto since_start = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  };
  std::thread a([&] {
    try {
      s.add("n", 1);
    } catch (const StoreError& e) {
      under_way = e.what();
    } catch (const std::exception& e) {
      under_way = std::string("not a StoreError: ") + e.what();
    }
    under_way_ended_ms = since_start();
  });
  std::this_thread::sleep_for(200ms);  // a's ADD is sent and waits for its reply
  std::thread b([&] {
    try {
      s.get("k");
    } catch (const StoreError& e) {
      queued = e.what();
    } catch (const std::exception& e) {
      queued = std::string("not a StoreError: ") + e.what();
    }
    queued_ended_ms = since_start();
  });
  std::this_thread::sleep_for(200ms);  // b waits for the connection
  const int64_t cut_at_ms = since_start();
  s.cut_off("its heartbeats have not reached the store for 3.0 s");
  a.join();
  b.join();
  for (const std::string& e : {under_way, queued}) {
    EXPECT_NE(e.find("TCPStore: this client's connection to 127.0.0.1:" + std::to_string(server.port()) +
                     " was cut off: its heartbeats have not reached the store for 3.0 s"),
              std::string::npos)
        << e;
  }
  // At once, not after the store's 20 s.
  EXPECT_LT(under_way_ended_ms - cut_at_ms, 1000) << under_way;
  EXPECT_LT(queued_ended_ms - cut_at_ms, 1000) << queued;
}

// Once cut off, a client never asks the server again, even one that answers: every call
// throws at once; a second cut_off keeps the first why.
TEST(TCPStoreCutOff, EveryLaterCallThrowsAtOnceWithTheFirstWhy) {
  ForkedStoreServer server;
  TCPStore s(client_of(server.port(), 20s));
  s.set("k", "v");
  s.cut_off("first");
  s.cut_off("second");
  const auto [get, get_took] = error_of<StoreError>([&] { s.get("k"); });
  EXPECT_NE(get.find("was cut off: first"), std::string::npos) << get;
  EXPECT_EQ(get.find("second"), std::string::npos) << get;
  EXPECT_LT(get_took, 100ms);
  EXPECT_LT(time_of([&] { EXPECT_THROW(s.wait({"absent"}, 10s), StoreError); }), 100ms);
  EXPECT_LT(time_of([&] { EXPECT_THROW(s.add("n", 1), StoreError); }), 100ms);
  EXPECT_THROW(read_present(s, {"k"}), StoreError);
  // The server itself is fine: another client still reads the key.
  TCPStore other(client_of(server.port(), 5s));
  EXPECT_EQ(other.get_string("k"), "v");
}

// A wait under way (WAIT_FOR, whose reply may be seconds away by design) ends too.
TEST(TCPStoreCutOff, AWaitUnderWayEndsAtOnce) {
  ForkedStoreServer server;
  TCPStore s(client_of(server.port(), 20s));
  std::string error;
  std::thread w([&] {
    try {
      s.wait({"never"}, 15s);
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  std::this_thread::sleep_for(300ms);
  const auto cut = std::chrono::steady_clock::now();
  s.cut_off("the test is done with it");
  w.join();
  EXPECT_LT(std::chrono::steady_clock::now() - cut, 1s);
  EXPECT_NE(error.find("was cut off: the test is done with it"), std::string::npos) << error;
}

}  // namespace
}  // namespace distcomm
