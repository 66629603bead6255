// The host message exchange, over both transports, with real processes: what every rank
// gets, in which order, what stays in the store, and what a missing rank makes the others
// say.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "api/errors.h"
#include "api/store/file_store.h"
#include "api/group/host_exchange.h"
#include "api/group/init_wait.h"
#include "api/store/hash_store.h"
#include "api/process_group.h"
#include "tests/api/plugin_test_env.h"
#include "tests/testing/captured_stderr.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/distcomm_exchange_test_XXXXXX";
    path_ = ::mkdtemp(pattern) ? pattern : "";
  }
  ~TempDir() {
    ::unlink((path_ + "/store").c_str());
    ::rmdir(path_.c_str());
  }
  std::string store() const { return path_ + "/store"; }

 private:
  std::string path_;
};

HostExchangeOptions options_for(int rank, int size, milliseconds timeout = milliseconds(20000)) {
  HostExchangeOptions o;
  o.rank = rank;
  o.size = size;
  o.timeout = timeout;
  o.where = "rank " + std::to_string(rank) + "/" + std::to_string(size) + " group 'test'";
  return o;
}

// Messages of different lengths (the empty one too), posted in reverse rank order.
void expect_all_gather_and_gather(HostExchange& exchange, int rank, int size) {
  std::this_thread::sleep_for(milliseconds(20 * (size - rank)));
  const auto all = exchange.all_gather(std::string(static_cast<size_t>(rank), 'x'));
  ASSERT_EQ(all.size(), static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) EXPECT_EQ(all[static_cast<size_t>(r)], std::string(static_cast<size_t>(r), 'x'));
  const auto at_one = exchange.gather("from " + std::to_string(rank), 1);
  if (rank == 1) {
    ASSERT_EQ(at_one.size(), static_cast<size_t>(size));
    for (int r = 0; r < size; ++r) EXPECT_EQ(at_one[static_cast<size_t>(r)], "from " + std::to_string(r));
  } else {
    EXPECT_TRUE(at_one.empty());
  }
  // A second all_gather after the gather: numbered calls keep them apart.
  EXPECT_EQ(exchange.all_gather(std::to_string(rank * 10))[static_cast<size_t>(size - 1)],
            std::to_string((size - 1) * 10));
}

TEST(HostExchange, OverAStoreEveryRankGetsEveryMessageInRankOrder) {
  TempDir dir;
  testing::run_ranks(4, [&](int rank, int size) {
    auto store = std::make_shared<FileStore>(dir.store(), size);
    auto exchange = make_store_exchange(options_for(rank, size), store, "ex/");
    expect_all_gather_and_gather(*exchange, rank, size);
  });
}

TEST(HostExchange, OverAStoreKeysDoNotPileUp) {
  TempDir dir;
  testing::run_ranks(3, [&](int rank, int size) {
    auto store = std::make_shared<FileStore>(dir.store(), size);
    const int64_t before = store->num_keys();
    auto exchange = make_store_exchange(options_for(rank, size), store, "ex/");
    for (int i = 0; i < 50; ++i) {
      exchange->all_gather(std::to_string(i));
      exchange->gather(std::to_string(i), i % size);
    }
    const auto counts = exchange->all_gather(std::to_string(store->num_keys() - before));
    // What one all_gather leaves until the next (one key a rank), and a gather's keys on
    // their way to a root that has not read them yet: never a key per call.
    for (const std::string& c : counts) EXPECT_LE(std::stoll(c), 3 * size) << "keys left in the store";
  });
}

TEST(HostExchange, OverAStoreAMissingRankIsNamed) {
  TempDir dir;
  testing::run_ranks(3, [&](int rank, int size) {
    auto store = std::make_shared<FileStore>(dir.store(), size);
    auto exchange = make_store_exchange(options_for(rank, size, milliseconds(1500)), store, "ex/");
    if (rank == 2) {
      store->wait({"test/done"}, milliseconds(30000));  // never takes part
      return;
    }
    const auto start = Clock::now();
    try {
      exchange->all_gather("hello");
      ADD_FAILURE() << "an exchange without rank 2 succeeded";
    } catch (const Timeout& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("ranks [2] did not post"), std::string::npos) << msg;
      EXPECT_NE(msg.find("group 'test'"), std::string::npos) << msg;
      EXPECT_NE(msg.find("exchange #0"), std::string::npos) << msg;
    }
    const double took = std::chrono::duration<double>(Clock::now() - start).count();
    EXPECT_GE(took, 1.4);
    EXPECT_LE(took, 1.5 + 5);
    if (rank == 0) store->set("test/done", "1");
  });
}

// A wait that lasts says every stall report interval whom it waits for
// (DISTCOMM_STALL_REPORT_SECONDS), not only when it gives up: the group's timeout is 30
// minutes by default (helper-59's audit: split, DDP's construction, ordered prints waited
// that long in silence).
TEST(HostExchange, OverAStoreALongWaitSaysWhomItWaitsFor) {
  TempDir dir;
  testing::run_ranks(2, [&](int rank, int size) {
    ::setenv("DISTCOMM_STALL_REPORT_SECONDS", "0.3", 1);
    auto store = std::make_shared<FileStore>(dir.store(), size);
    auto exchange = make_store_exchange(options_for(rank, size, milliseconds(1500)), store, "ex/");
    if (rank == 1) {
      store->wait({"test/done"}, milliseconds(30000));  // never takes part
      return;
    }
    testing::CapturedStderr err;
    EXPECT_THROW(exchange->all_gather("hello"), Timeout);
    const std::string logged = err.text();
    EXPECT_NE(logged.find("host message exchange #0 has waited"), std::string::npos) << logged;
    EXPECT_NE(logged.find("for ranks [1] to post"), std::string::npos) << logged;
    store->set("test/done", "1");
  });
}

// A group aborted while a rank waits in its exchange (ft's liveness monitor aborts the group
// of a member found gone) ends that wait within a look or two, saying so; before, it waited
// the group's timeout (20 s here) for the rank that never came.
TEST(HostExchange, AnAbortedGroupEndsItsExchangeWait) {
  testing::run_group(2, "gloo", [](ProcessGroup& pg) {
    if (pg.rank() == 1) {
      pg.store()->wait({"test/done"}, milliseconds(30000));  // alive, never takes part
      return;
    }
    std::thread aborter([&] {
      std::this_thread::sleep_for(milliseconds(300));
      pg.abort();
    });
    const auto start = Clock::now();
    try {
      pg.exchange().all_gather("hello");
      ADD_FAILURE() << "an exchange without rank 1 succeeded";
    } catch (const PeerFailure& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("the group was aborted (ProcessGroup::abort) while it waited for ranks [1]"),
                std::string::npos)
          << msg;
      EXPECT_NE(msg.find("host message exchange #"), std::string::npos) << msg;
    }
    aborter.join();
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 3.0);
    pg.store()->set("test/done", "1");
  }, [] {
    testing::GroupHarnessOptions o;
    o.op_timeout = milliseconds(20000);
    return o;
  }());
}

// The transport of groups without a shared store (MPI's), here over gloo's all_gather.
TEST(HostExchange, OverCollectivesEveryRankGetsEveryMessageInRankOrder) {
  use_test_plugins();
  TempDir dir;
  testing::run_ranks(3, [&](int rank, int size) {
    ProcessGroupOptions o;
    o.store = std::make_shared<FileStore>(dir.store(), size);  // gloo's rendezvous
    o.rank = rank;
    o.size = size;
    o.backend = "gloo";
    o.timeout = std::chrono::seconds(20);
    auto pg = ProcessGroup::create(o);
    int calls = 0;
    auto exchange = make_collective_exchange(options_for(rank, size), [&](Tensor& out, const Tensor& in) {
      ++calls;
      pg->all_gather_into_tensor(out, in)->wait();
    });
    expect_all_gather_and_gather(*exchange, rank, size);
    EXPECT_EQ(calls, 6) << "two all_gathers (lengths, bytes) per call";
  });
}

// Calls that pair up but are not the same call (one rank's ordered_print with another's DDP
// log line, or with its split) get a Desync naming each rank's purpose, on every rank that
// reads the messages; never each other's bytes (helper-72: rank 0's ordered_print printed
// rank 1's DDP statistics, exit code 0). Both transports.
void expect_different_purposes_are_named(HostExchange& exchange, int rank) {
  const std::string purpose = rank == 1 ? "split #0 on group 'test'" : "ordered_print";
  try {
    exchange.all_gather("bytes of rank " + std::to_string(rank), purpose);
    ADD_FAILURE() << "rank " << rank << ": calls of different purposes paired up";
  } catch (const Desync& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("rank 0: ordered_print; rank 1: split #0 on group 'test'; rank 2: ordered_print"),
              std::string::npos) << msg;
    EXPECT_NE(msg.find("host message exchange #0"), std::string::npos) << msg;
  }
  // Only the root reads a gather's messages: it names them, the others have posted theirs.
  const std::string gather_purpose = rank == 2 ? "an ordered log line" : "ordered_print";
  if (rank == 0) {
    EXPECT_THROW(exchange.gather("line", 0, gather_purpose), Desync);
  } else {
    EXPECT_TRUE(exchange.gather("line", 0, gather_purpose).empty());
  }
  // The same purpose everywhere pairs up as before.
  EXPECT_EQ(exchange.all_gather(std::to_string(rank), "agreed").back(), "2");
}

TEST(HostExchange, OverAStoreCallsOfDifferentPurposesAreADesync) {
  TempDir dir;
  testing::run_ranks(3, [&](int rank, int size) {
    auto store = std::make_shared<FileStore>(dir.store(), size);
    auto exchange = make_store_exchange(options_for(rank, size), store, "ex/");
    expect_different_purposes_are_named(*exchange, rank);
  });
}

TEST(HostExchange, OverCollectivesCallsOfDifferentPurposesAreADesync) {
  use_test_plugins();
  TempDir dir;
  testing::run_ranks(3, [&](int rank, int size) {
    ProcessGroupOptions o;
    o.store = std::make_shared<FileStore>(dir.store(), size);
    o.rank = rank;
    o.size = size;
    o.backend = "gloo";
    o.timeout = std::chrono::seconds(20);
    auto pg = ProcessGroup::create(o);
    auto exchange = make_collective_exchange(options_for(rank, size), [&](Tensor& out, const Tensor& in) {
      pg->all_gather_into_tensor(out, in)->wait();
    });
    expect_different_purposes_are_named(*exchange, rank);
  });
}

// A call made while a group is being created (the auto backend's placements) waits as the
// creation does: it ends when another rank's part of the creation has failed (its failure
// key, which ft's liveness monitor writes for a member that died after it arrived), and at
// the creation's deadline, not after the exchange's own timeout (20 s here; the group's op
// timeout, 30 minutes by default, for the ft job whose survivors waited that long).
TEST(HostExchange, DuringACreationAWaitEndsWithTheCreation) {
  auto store = std::make_shared<HashStore>();
  auto exchange = make_store_exchange(options_for(0, 2), store, "ex/");  // rank 1 never posts
  InitWait creation = InitWait::starting_now(milliseconds(20000), milliseconds(20000), "rank 0/2 group 'test'");
  creation.failure_store = store.get();
  creation.failure_key = "pg/test/creation_failed";
  std::thread says([&] {
    std::this_thread::sleep_for(milliseconds(300));
    store->set(creation.failure_key,
               encode_creation_failure(1, std::make_exception_ptr(PeerFailure("member rank1 is gone"))));
  });
  auto start = Clock::now();
  try {
    const BackendCreationScope creating(creation);
    exchange->all_gather("placement");
    ADD_FAILURE() << "an exchange without rank 1 succeeded";
  } catch (const Error& e) {  // not only PeerFailure: the thread is joined below whatever came
    EXPECT_NE(dynamic_cast<const PeerFailure*>(&e), nullptr) << e.what();
    EXPECT_NE(std::string(e.what()).find("member rank1 is gone"), std::string::npos) << e.what();
  }
  says.join();
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 3.0);

  // Its deadline: a Timeout naming the rank that did not post.
  auto later = make_store_exchange(options_for(0, 2), store, "later/");
  InitWait short_one = InitWait::starting_now(milliseconds(600), milliseconds(20000), "rank 0/2 group 'test'");
  start = Clock::now();
  try {
    const BackendCreationScope creating(short_one);
    later->all_gather("placement");
    ADD_FAILURE() << "an exchange without rank 1 succeeded";
  } catch (const Timeout& e) {
    EXPECT_NE(std::string(e.what()).find("[1]"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 3.0);
}

TEST(HostExchange, GatherRefusesARootOutsideTheGroup) {
  TempDir dir;
  auto store = std::make_shared<FileStore>(dir.store(), 1);
  auto exchange = make_store_exchange(options_for(0, 2), store, "ex/");
  EXPECT_THROW(exchange->gather("x", 2), InvalidArgument);
  EXPECT_THROW(exchange->gather("x", -1), InvalidArgument);
}

}  // namespace
}  // namespace distcomm
