// The communicator registry and the ncclUniqueId exchange, on the CPU: looking a
// communicator up never waits for one being set up, a shutdown on another thread reaches
// a communicator whose rank is still waiting for its peers and ends that wait at once,
// a group made again over the same store never reads the earlier group's id, and a made
// communicator's id leaves the store.
#include "backends/nccl/comm_registry.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "api/errors.h"
#include "api/store/hash_store.h"
#include "api/group/init_wait.h"
#include "backends/nccl/unique_id_exchange.h"

namespace distcomm {
namespace nccl {
namespace testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A communicator whose setup is the real id exchange of a rank that is not the root.
struct SettingUp {
  explicit SettingUp(Store* store) { x.store = store; }
  void initialize(std::chrono::milliseconds timeout) {
    exchange_unique_id(x, nullptr, Clock::now() + timeout, aborted);
  }
  void abort() { aborted = true; }
  UniqueIdExchange x{nullptr, "nccl/1/comm0/unique_id", false, 128, "NCCL communicator #0 of group 'world'", 1, 2, {}};
  std::atomic<bool> aborted{false};
};

TEST(CommRegistryTest, ANameGivesOneCommunicatorMadeOnce) {
  CommRegistry<int> registry;
  std::atomic<int> made{0};
  auto make = [&] {
    ++made;
    return std::make_shared<int>(42);
  };
  std::vector<std::thread> threads;
  std::vector<std::shared_ptr<int>> got(8);
  for (int i = 0; i < 8; ++i) threads.emplace_back([&, i] { got[i] = registry.get_or_make("group on cuda:0", make); });
  for (auto& t : threads) t.join();
  EXPECT_EQ(made, 1);
  for (auto& g : got) EXPECT_EQ(g, got[0]);
  EXPECT_EQ(registry.find("group on cuda:0"), got[0]);
  EXPECT_EQ(registry.find("pair with rank 1"), nullptr);
}

TEST(CommRegistryTest, ShutdownReachesACommunicatorWhoseRankWaitsForItsPeers) {
  HashStore store;
  CommRegistry<SettingUp> registry;
  auto comm = registry.get_or_make("group on cuda:0", [&] { return std::make_shared<SettingUp>(&store); });
  // Rank 0 never publishes the id: the setup waits, holding no lock of the registry.
  auto setup = std::async(std::launch::async, [&] {
    try {
      comm->initialize(60000ms);
      return std::string("setup returned");
    } catch (const PeerFailure& e) {
      return std::string(e.what());
    }
  });
  std::this_thread::sleep_for(50ms);
  auto start = Clock::now();
  auto other = registry.get_or_make("pair with rank 1", [&] { return std::make_shared<SettingUp>(&store); });
  EXPECT_LT(Clock::now() - start, 1s) << "a lookup waited for a communicator being set up";
  start = Clock::now();
  auto all = registry.close("the nccl backend of group 'world' was shut down");
  ASSERT_EQ(all.size(), 2u);
  for (auto& c : all) c->abort();
  ASSERT_EQ(setup.wait_for(5s), std::future_status::ready) << "the setup did not see the abort";
  EXPECT_LT(Clock::now() - start, 2s);
  const std::string m = setup.get();
  EXPECT_NE(m.find("aborted while rank 1 of 2 waited for rank 0's ncclUniqueId"), std::string::npos) << m;
  try {
    registry.get_or_make("group on cuda:1", [&] { return std::make_shared<SettingUp>(&store); });
    ADD_FAILURE() << "a closed registry made a communicator";
  } catch (const PeerFailure& e) {
    EXPECT_NE(std::string(e.what()).find("was shut down"), std::string::npos) << e.what();
  }
}

UniqueIdExchange exchange(Store& store, const std::string& key, int rank) {
  return {&store, key, rank == 0, 4, "NCCL communicator #0 of group 'world' on cuda:0", rank, 2, {}};
}

TEST(UniqueIdExchangeTest, RankZeroPublishesAndTheOthersRead) {
  HashStore store;
  std::atomic<bool> aborted{false};
  auto reader = std::async(std::launch::async, [&] {
    return exchange_unique_id(exchange(store, "nccl/1/comm0/unique_id", 1), nullptr, Clock::now() + 10s, aborted);
  });
  const Store::Bytes id{1, 2, 3, 4};
  EXPECT_EQ(exchange_unique_id(exchange(store, "nccl/1/comm0/unique_id", 0), [&] { return id; },
                               Clock::now() + 10s, aborted),
            id);
  EXPECT_EQ(reader.get(), id);
}

// Once the communicator is made (NCCL's setup ended: every rank had read the id), the root
// deletes the id and its process record. Before, both stayed in the store for the job's
// life: two keys per communicator made.
TEST(UniqueIdExchangeTest, TheRootDeletesItsKeysOnceTheCommunicatorIsMade) {
  HashStore store;
  std::atomic<bool> aborted{false};
  const int64_t before = store.num_keys();
  const std::string key = "nccl/1/comm0/unique_id";
  auto reader = std::async(std::launch::async, [&] {
    return exchange_unique_id(exchange(store, key, 1), nullptr, Clock::now() + 10s, aborted);
  });
  const Store::Bytes id{1, 2, 3, 4};
  EXPECT_EQ(exchange_unique_id(exchange(store, key, 0), [&] { return id; }, Clock::now() + 10s, aborted), id);
  EXPECT_EQ(reader.get(), id);
  EXPECT_TRUE(store.check({key}));
  EXPECT_TRUE(store.check({root_process_key(key)}));
  // A rank other than the root deletes nothing: one rank's requests suffice.
  forget_unique_id(exchange(store, key, 1));
  EXPECT_TRUE(store.check({key}));
  forget_unique_id(exchange(store, key, 0));
  EXPECT_FALSE(store.check({key})) << "the id stayed in the store";
  EXPECT_FALSE(store.check({root_process_key(key)})) << "the root's process record stayed in the store";
  EXPECT_EQ(store.num_keys(), before);
}

// A store that fails its deletes leaves the keys; the communicator, made, is not failed.
class NoDeleteStore : public HashStore {
 public:
  bool delete_key(const std::string& key) override { throw Error("the store's connection was lost"); }
};

TEST(UniqueIdExchangeTest, AStoreThatCannotDeleteIsNoError) {
  NoDeleteStore store;
  std::atomic<bool> aborted{false};
  exchange_unique_id(exchange(store, "k", 0), [] { return Store::Bytes{1, 2, 3, 4}; }, Clock::now() + 1s, aborted);
  EXPECT_NO_THROW(forget_unique_id(exchange(store, "k", 0)));
  EXPECT_TRUE(store.check({"k"}));
}

TEST(UniqueIdExchangeTest, AMissingRootIsATimeoutNamingTheKeyNotBeforeTheDeadline) {
  HashStore store;
  std::atomic<bool> aborted{false};
  const auto start = Clock::now();
  try {
    exchange_unique_id(exchange(store, "nccl/1/comm3/unique_id", 1), nullptr, start + 80ms, aborted);
    ADD_FAILURE() << "no timeout";
  } catch (const Timeout& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("rank 1 of 2 waited"), std::string::npos) << m;
    EXPECT_NE(m.find("'nccl/1/comm3/unique_id'"), std::string::npos) << m;
  }
  EXPECT_GE(Clock::now() - start, 80ms);
  EXPECT_LT(Clock::now() - start, 2s);
}

TEST(UniqueIdExchangeTest, AnIdOfTheWrongSizeIsRefused) {
  HashStore store;
  store.set("k", Store::Bytes{1, 2, 3});
  std::atomic<bool> aborted{false};
  try {
    exchange_unique_id(exchange(store, "k", 1), nullptr, Clock::now() + 1s, aborted);
    ADD_FAILURE() << "a 3-byte id was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has 3 bytes, expected 4"), std::string::npos) << e.what();
  }
}

// A root whose ncclGetUniqueId fails publishes why; the others end at once with that
// reason and the root's rank, not after the whole timeout with a bare Timeout.
TEST(UniqueIdExchangeTest, ARootThatCannotMakeTheIdFailsItsPeersAtOnceWithItsReason) {
  HashStore store;
  std::atomic<bool> aborted{false};
  const auto start = Clock::now();
  auto peer = std::async(std::launch::async, [&] {
    try {
      exchange_unique_id(exchange(store, "nccl/1/comm0/unique_id", 1), nullptr, Clock::now() + 60s, aborted);
      return std::string("the peer got an id");
    } catch (const PeerFailure& e) {
      return std::string(e.what());
    } catch (const std::exception& e) {
      return std::string("wrong error: ") + e.what();
    }
  });
  std::this_thread::sleep_for(20ms);
  try {
    exchange_unique_id(exchange(store, "nccl/1/comm0/unique_id", 0),
                       []() -> Store::Bytes { throw Error("ncclGetUniqueId failed: unhandled system error"); },
                       Clock::now() + 60s, aborted);
    ADD_FAILURE() << "the root's error was swallowed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unhandled system error"), std::string::npos) << e.what();
  }
  ASSERT_EQ(peer.wait_for(5s), std::future_status::ready) << "the peer waits on after the root failed";
  EXPECT_LT(Clock::now() - start, 5s);
  const std::string m = peer.get();
  EXPECT_NE(m.find("rank 1 of 2 cannot join: rank 0 could not make the ncclUniqueId"), std::string::npos) << m;
  EXPECT_NE(m.find("ncclGetUniqueId failed: unhandled system error"), std::string::npos) << m;
}

// A failure marker is never taken for an id, whatever the length of the reason.
TEST(UniqueIdExchangeTest, AFailureMarkerIsNeverOfAnIdsLength) {
  for (size_t id_size : {4u, 60u, 61u, 62u, 128u}) {
    for (size_t len = 0; len < 80; ++len) {
      EXPECT_NE(root_failure_marker(std::string(len, 'x'), id_size).size(), id_size);
    }
  }
}

// A peer blocks in the store's wait, in coarse slices: a few requests a second, not one
// every few milliseconds, whatever the wait's length.
class CountingStore : public HashStore {
 public:
  bool check(const std::vector<std::string>& keys) override {
    ++requests;
    return HashStore::check(keys);
  }
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    ++requests;
    HashStore::wait(keys, timeout);
  }
  std::atomic<int> requests{0};
};

TEST(UniqueIdExchangeTest, APeerWaitsInTheStoreNotByPollingIt) {
  CountingStore store;
  std::atomic<bool> aborted{false};
  EXPECT_THROW(exchange_unique_id(exchange(store, "nccl/1/comm0/unique_id", 1), nullptr, Clock::now() + 1200ms,
                                  aborted),
               Timeout);
  // One wait a kWaitSlice (50 ms: the shared connection is left free between slices), not
  // a check every 10 ms (130 requests in 1.2 s before).
  EXPECT_LE(store.requests.load(), 1200 / int(kWaitSlice.count()) + 2)
      << "the peer asked the store " << store.requests << " times in 1.2 s";
}

// The same store and group name twice (a program that destroys its group and makes it
// again): the second group's ranks wait for the second id, never reading the first.
TEST(UniqueIdExchangeTest, AGroupMadeAgainOverTheSameStoreGetsFreshKeys) {
  HashStore store;
  std::atomic<bool> aborted{false};
  const std::string first0 = fresh_key_prefix(store, 0), first1 = fresh_key_prefix(store, 1);
  EXPECT_EQ(first0, first1) << "the ranks of one group agree on the keys";
  exchange_unique_id(exchange(store, first0 + "comm0/unique_id", 0), [] { return Store::Bytes{1, 1, 1, 1}; },
                     Clock::now() + 1s, aborted);
  exchange_unique_id(exchange(store, first1 + "comm0/unique_id", 1), nullptr, Clock::now() + 1s, aborted);

  const std::string second0 = fresh_key_prefix(store, 0), second1 = fresh_key_prefix(store, 1);
  EXPECT_EQ(second0, second1);
  EXPECT_NE(second0, first0);
  // Rank 1 of the second group comes first: the first group's id is still in the store.
  EXPECT_THROW(exchange_unique_id(exchange(store, second1 + "comm0/unique_id", 1), nullptr, Clock::now() + 50ms,
                                  aborted),
               Timeout)
      << "rank 1 read the earlier group's id";
  exchange_unique_id(exchange(store, second0 + "comm0/unique_id", 0), [] { return Store::Bytes{2, 2, 2, 2}; },
                     Clock::now() + 1s, aborted);
  EXPECT_EQ(exchange_unique_id(exchange(store, second1 + "comm0/unique_id", 1), nullptr, Clock::now() + 1s, aborted),
            (Store::Bytes{2, 2, 2, 2}));
}

// Rank 0 failed (and published its failure on the group's board) before it published the
// id: its peers stop waiting within a slice or two, naming what it published, instead of
// waiting out the whole timeout.
TEST(UniqueIdExchangeTest, APublishedFailureEndsThePeersWaitPromptly) {
  HashStore store;
  UniqueIdExchange x{&store, "nccl/1/comm0/unique_id", false, 128, "NCCL communicator #0 of group 'world'", 1, 2, {}};
  std::atomic<int> asked{0};
  x.peer_failure = [&]() -> std::string {
    return ++asked < 2 ? "" : "rank 0 of the group has published its failure: CUDA error: out of memory";
  };
  std::atomic<bool> aborted{false};
  const auto start = Clock::now();
  try {
    exchange_unique_id(x, nullptr, Clock::now() + 60s, aborted);
    FAIL() << "no PeerFailure";
  } catch (const PeerFailure& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("rank 0 of the group has published its failure: CUDA error"), std::string::npos) << m;
  }
  EXPECT_LT(Clock::now() - start, 10s);
  EXPECT_EQ(asked, 2);
}

}  // namespace
}  // namespace testing
}  // namespace nccl
}  // namespace distcomm
