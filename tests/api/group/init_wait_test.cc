// InitWait: one deadline for every phase of a group's creation, a line every report
// interval naming whom it waits for, a Timeout naming them; and the arrival step over a
// real store, with ranks as threads.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <gtest/gtest.h>

#include "api/group/environment.h"
#include "api/errors.h"
#include "api/store/hash_store.h"
#include "api/group/group_creation.h"
#include "api/group/init_wait.h"
#include "api/group/member_lists.h"
#include "api/store/internal/call_deadline.h"
#include "api/store/tcp_store.h"
#include "tests/testing/captured_stderr.h"
#include "tests/testing/forked_store_server.h"

namespace distcomm {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
using testing::stderr_of;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(InitWait, ReportsEveryIntervalThenTimesOutNamingTheMissing) {
  const InitWait w = InitWait::starting_now(milliseconds(600), milliseconds(100), "rank 0/3 group 'g'");
  std::string message;
  const auto start = Clock::now();
  const std::string logged = stderr_of([&] {
    try {
      w.until("to do the thing", [](milliseconds slice) {
        std::this_thread::sleep_for(slice);
        return false;
      }, [] { return std::vector<int>{1, 2}; }, "they are elsewhere");
    } catch (const Timeout& e) {
      message = e.what();
    }
  });
  const double took = seconds_since(start);
  EXPECT_GE(took, 0.6);
  EXPECT_LT(took, 0.6 + 2.0) << "the deadline held (2 s of slack for a busy machine)";
  EXPECT_NE(message.find("rank 0/3 group 'g': init timed out after 0.6 s"), std::string::npos) << message;
  EXPECT_NE(message.find("waiting for ranks [1, 2] to do the thing; they are elsewhere"), std::string::npos) << message;
  // Reports at 0.1, 0.2, ... 0.5 s: never more than one per interval, and at least one.
  const size_t reports = count_of(logged, "init has waited");
  EXPECT_GE(reports, 1u) << logged;
  EXPECT_LE(reports, 6u) << logged;
  EXPECT_NE(logged.find("for ranks [1, 2] to do the thing (it gives up in"), std::string::npos) << logged;
}

TEST(InitWait, ASubgroupNamesWorldRanksToo) {
  InitWait w = InitWait::starting_now(milliseconds(30), milliseconds(1000), "rank 0/2 group 'world/g0'");
  w.global_ranks = {3, 5};
  try {
    w.until("to arrive", [](milliseconds slice) {
      std::this_thread::sleep_for(slice);
      return false;
    }, [] { return std::vector<int>{1}; }, "");
    ADD_FAILURE() << "no Timeout";
  } catch (const Timeout& e) {
    EXPECT_NE(std::string(e.what()).find("waiting for ranks [1] (world ranks [5]) to arrive"), std::string::npos)
        << e.what();
  }
}

TEST(InitWait, APhaseThatEndsReturnsAtOnceAndSaysNothing) {
  const InitWait w = InitWait::starting_now(milliseconds(5000), milliseconds(100), "here");
  int polls = 0;
  const std::string logged = stderr_of([&] {
    w.until("x", [&](milliseconds) { return ++polls == 1; }, [] { return std::vector<int>{}; }, "");
  });
  EXPECT_EQ(polls, 1);
  EXPECT_EQ(logged, "");
}

TEST(InitWait, UnknownMissingRanksAreTheOtherRanks) {
  const InitWait w = InitWait::starting_now(milliseconds(50), milliseconds(1000), "here");
  try {
    w.until("to pass MPI_Init", [](milliseconds slice) {
      std::this_thread::sleep_for(slice);
      return false;
    }, [] { return std::vector<int>{}; }, "");
    ADD_FAILURE() << "no Timeout";
  } catch (const Timeout& e) {
    EXPECT_NE(std::string(e.what()).find("waiting for the other ranks to pass MPI_Init"), std::string::npos) << e.what();
  }
}

TEST(InitWait, ABackendGetsWhatIsLeftOfTheGroupsDeadline) {
  InitWait creation = InitWait::starting_now(milliseconds(250), milliseconds(40), "group");
  {
    const BackendCreationScope creating(creation);
    const InitWait w = InitWait::for_backend({}, milliseconds(60000), "b");
    EXPECT_LE(w.left(), milliseconds(250));
    EXPECT_GT(w.left(), milliseconds(0));
    EXPECT_EQ(w.deadline, creation.deadline) << "the creation's deadline, typed, not a text to parse";
    EXPECT_EQ(w.report_every, milliseconds(40));
    EXPECT_EQ(w.timeout, milliseconds(60000)) << "messages speak of the group's timeout";
    {
      // A subgroup's creation inside another's: the innermost scope counts.
      const InitWait inner = InitWait::starting_now(milliseconds(90), milliseconds(30), "subgroup");
      const BackendCreationScope nested(inner);
      EXPECT_EQ(InitWait::for_backend({}, milliseconds(60000), "b").deadline, inner.deadline);
    }
    EXPECT_EQ(InitWait::for_backend({}, milliseconds(60000), "b").deadline, creation.deadline);
  }
  // Created outside a group's creation: the whole timeout, the default interval.
  EXPECT_EQ(BackendCreationScope::current(), nullptr);
  const InitWait alone = InitWait::for_backend({}, milliseconds(7000), "b");
  EXPECT_GT(alone.left(), milliseconds(6000));
  EXPECT_EQ(alone.report_every, kDefaultInitReportInterval);
}

// What init does with DISTCOMM_INIT_REPORT_SECONDS (read in environment.cc).
milliseconds init_report_interval_from_environment() {
  return parse_init_report_seconds(InitEnvironment::read().init_report_seconds);
}

TEST(InitWait, ReportIntervalFromTheEnvironment) {
  ::unsetenv("DISTCOMM_INIT_REPORT_SECONDS");
  EXPECT_EQ(init_report_interval_from_environment(), milliseconds(30000));
  ::setenv("DISTCOMM_INIT_REPORT_SECONDS", "0.25", 1);
  EXPECT_EQ(init_report_interval_from_environment(), milliseconds(250));
  for (const char* bad : {"0", "-1", "soon", "1e9", "nan"}) {
    ::setenv("DISTCOMM_INIT_REPORT_SECONDS", bad, 1);
    try {
      init_report_interval_from_environment();
      ADD_FAILURE() << bad << " was taken";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("DISTCOMM_INIT_REPORT_SECONDS='") + bad + "'"),
                std::string::npos)
          << e.what();
    }
  }
  ::unsetenv("DISTCOMM_INIT_REPORT_SECONDS");
}

// Ranks 0 and 1 of 3 arrive; rank 2 never does: both name it at the deadline.
TEST(WaitForArrivals, NamesTheRankThatNeverArrives) {
  HashStore store;
  std::vector<std::string> errors(2);
  std::vector<std::thread> ranks;
  const auto start = Clock::now();
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      const InitWait w = InitWait::starting_now(milliseconds(400), milliseconds(10000), "rank " + std::to_string(r));
      try {
        wait_for_arrivals(store, "pg/g/", r, 3, w, "the test's store");
      } catch (const Timeout& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : ranks) t.join();
  EXPECT_LT(seconds_since(start), 0.4 + 2.0);
  for (const std::string& e : errors) {
    EXPECT_NE(e.find("waiting for ranks [2] to arrive at the store (the test's store)"), std::string::npos) << e;
  }
}

TEST(WaitForArrivals, EndsWhenTheLastRankArrives) {
  HashStore store;
  std::atomic<int> done{0};
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r) {
    ranks.emplace_back([&, r] {
      const InitWait w = InitWait::starting_now(milliseconds(20000), milliseconds(10000), "r");
      wait_for_arrivals(store, "pg/g/", r, 3, w, "s");
      ++done;
    });
  }
  for (auto& t : ranks) t.join();
  EXPECT_EQ(done.load(), 3);
}

// What another rank left under creation_failed ends this rank's wait with its kind: a
// Timeout (it names the ranks that never came) stays a Timeout; anything else is a
// PeerFailure. Both quote it.
TEST(InitWait, AnotherRanksCreationFailureEndsTheWaitWithItsKind) {
  HashStore store;
  const auto failed_with = [&](std::exception_ptr first) -> std::exception_ptr {
    store.set("pg/g/creation_failed", encode_creation_failure(0, first));
    InitWait w = InitWait::starting_now(milliseconds(20000), milliseconds(10000), "rank 2/3 group 'g'");
    w.failure_store = &store;
    w.failure_key = "pg/g/creation_failed";
    try {
      wait_for_keys(store, {"never"}, {1}, w, "to arrive", "");
    } catch (...) {
      return std::current_exception();
    }
    return nullptr;
  };
  const auto start = Clock::now();
  std::exception_ptr e = failed_with(std::make_exception_ptr(Timeout("waiting for ranks [1] to arrive")));
  EXPECT_LT(seconds_since(start), 2.0);
  try {
    std::rethrow_exception(e);
  } catch (const Timeout& t) {
    EXPECT_STREQ(t.what(),
                 "rank 2/3 group 'g': init gave up waiting for ranks [1] to arrive: the group's creation failed on "
                 "rank 0: waiting for ranks [1] to arrive");
  } catch (...) {
    ADD_FAILURE() << "not a Timeout: " << message_of(e);
  }
  e = failed_with(std::make_exception_ptr(InvalidArgument("no such interface 'eth9'")));
  try {
    std::rethrow_exception(e);
  } catch (const PeerFailure& t) {
    EXPECT_NE(std::string(t.what()).find("the group's creation failed on rank 0: no such interface 'eth9'"),
              std::string::npos)
        << t.what();
  } catch (...) {
    ADD_FAILURE() << "not a PeerFailure: " << message_of(e);
  }
}

// A backend's rendezvous looks for failures in its own namespace (for_backend's store), where
// a group writes them only for the backends its spec names; a hierarchical group's flat
// backend across hosts (mpi) is not among them. Its wait also ends when the group making it
// (BackendCreationScope) has failed.
TEST(InitWait, ABackendsWaitEndsWhenTheGroupMakingItHasFailed) {
  HashStore group_store, backend_store;
  InitWait creation = InitWait::starting_now(milliseconds(20000), milliseconds(10000), "rank 2/4 group 'world'");
  creation.failure_store = &group_store;
  creation.failure_key = "pg/world/creation_failed";
  const BackendCreationScope making(creation);
  const InitWait w = InitWait::for_backend({}, milliseconds(20000), "rank 2/4 group 'world' (mpi)", {}, &backend_store);
  group_store.set("pg/world/creation_failed",
                  encode_creation_failure(3, std::make_exception_ptr(InvalidArgument("shm_slots='1' is too few"))));
  const auto start = Clock::now();
  try {
    wait_for_keys(backend_store, {"never"}, {1}, w, "to start MPI", "");
    ADD_FAILURE() << "the wait did not end";
  } catch (const PeerFailure& e) {
    EXPECT_STREQ(e.what(),
                 "rank 2/4 group 'world' (mpi): init gave up waiting for ranks [1] to start MPI: the group's creation "
                 "failed on rank 3: shm_slots='1' is too few");
  }
  EXPECT_LT(seconds_since(start), 2.0);
}

// The groups a group makes during its own creation (a hierarchical group's levels) wait for
// ranks that may have failed elsewhere in it: while an EnclosingCreationScope lives, their
// waits end when the enclosing creation has failed, naming the rank by its world rank.
TEST(InitWait, AWaitInsideAnEnclosingCreationEndsWhenThatCreationHasFailed) {
  HashStore store;
  InitWait world = InitWait::starting_now(milliseconds(20000), milliseconds(10000), "rank 0/4 group 'world'");
  world.failure_store = &store;
  world.failure_key = "pg/world/creation_failed";
  store.set("pg/world/creation_failed",
            encode_creation_failure(3, std::make_exception_ptr(InvalidArgument("shm_slots='1' is too few"))));
  auto level_wait = [&](milliseconds timeout) {
    InitWait level = InitWait::starting_now(timeout, milliseconds(10000), "rank 0/2 group 'world/hier_local0'");
    level.global_ranks = {0, 2};
    level.failure_store = &store;
    level.failure_key = "pg/world/hier_local0/creation_failed";
    wait_for_keys(store, {"never"}, {1}, level, "to arrive at the store", "");
  };
  {
    const EnclosingCreationScope enclosing(world);
    const auto start = Clock::now();
    try {
      level_wait(milliseconds(20000));
      ADD_FAILURE() << "the wait did not end";
    } catch (const PeerFailure& e) {
      EXPECT_STREQ(e.what(),
                   "rank 0/2 group 'world/hier_local0': init gave up waiting for ranks [1] (world ranks [2]) to "
                   "arrive at the store: the creation of the group this one is part of (rank 0/4 group 'world') "
                   "failed on rank 3: shm_slots='1' is too few");
    }
    EXPECT_LT(seconds_since(start), 2.0);
  }
  // Outside the scope the enclosing creation is not looked at: the wait runs to its deadline.
  EXPECT_THROW(level_wait(milliseconds(300)), Timeout);
}

// A group whose ranks are not the world's names the failed rank both ways.
TEST(CreationFailure, NamesTheWorldRankOfASubgroupsRank) {
  const std::string value = encode_creation_failure(1, std::make_exception_ptr(InvalidArgument("bad")));
  EXPECT_EQ(CreationFailure::decode(value, {2, 3}).text, "rank 1 (world rank 3): bad");
  EXPECT_EQ(CreationFailure::decode(value, {0, 1}).text, "rank 1: bad");
  EXPECT_EQ(CreationFailure::decode(value).text, "rank 1: bad");
}

// Rank 0's store goes away while this rank waits on it (rank 0 was killed: no farewell):
// the wait ends at once, naming the store's host, not with a bare StoreError. The same for
// the launcher's store.
TEST(InitWait, AStoreThatGoesAwayEndsTheWaitNamingTheRankThatServedIt) {
  for (const std::string host : {"rank 0", "the launcher", ""}) {
    TCPStoreOptions so;
    so.is_server = true;
    so.timeout = milliseconds(20000);
    auto server = std::make_unique<TCPStore>(so);
    TCPStoreOptions co = so;
    co.is_server = false;
    co.port = server->port();
    TCPStore client(co);
    InitWait w = InitWait::starting_now(milliseconds(20000), milliseconds(10000), "rank 2/3 group 'g'");
    w.failure_store = &client;
    w.failure_key = "pg/g/creation_failed";
    w.store_host = host;
    std::string message;
    bool peer_failure = false, store_error = false;
    std::thread waiter([&] {
      try {
        wait_for_keys(client, {"never"}, {1}, w, "to arrive at the store", "");
      } catch (const PeerFailure& e) {
        peer_failure = true;
        message = e.what();
      } catch (const StoreError& e) {
        store_error = true;
        message = e.what();
      }
    });
    const auto start = Clock::now();
    server.reset();  // no failure noted in this process: no farewell
    waiter.join();
    EXPECT_LT(seconds_since(start), 5.0) << "the store's loss ends the wait, not its deadline";
    EXPECT_NE(message.find("rank 2/3 group 'g': init gave up waiting for the other ranks to arrive at the store: the "
                           "store failed (TCPStore: "),
              std::string::npos)
        << message;
    if (host.empty()) {
      EXPECT_TRUE(store_error) << message;
    } else {
      EXPECT_TRUE(peer_failure) << message;
      EXPECT_NE(message.find("; " + host + " (which served the store) has exited or closed it"), std::string::npos)
          << message;
    }
  }
}

// The store's server stops answering (rank 0, which serves it, is stopped; its host froze)
// while a group is being made with a short deadline (a shrink's own timeout, new_group's):
// the creation's first store calls, which wait for nobody, end by that deadline, not by the
// store's timeout (the group's, 30 minutes by default; here a minute).
TEST(GroupCreationStore, AStoppedStoreCostsTheCreationsDeadlineNotTheStoresTimeout) {
  testing::ForkedStoreServer server;
  ProcessGroupOptions o;
  o.store = server.client(milliseconds(60000));
  o.rank = 1;
  o.size = 2;
  o.group_name = "shrunk";
  o.timeout = milliseconds(60000);
  server.stop();
  o.creation_deadline = Clock::now() + milliseconds(1000);
  o.creation_timeout = milliseconds(1000);
  GroupCreation creation(o, BackendSpec::parse("gloo"));
  const auto start = Clock::now();
  std::string message;
  try {
    creation.arrive();
  } catch (const Error& e) {
    message = e.what();
  }
  // The deadline and the creation's store slack (2 s).
  EXPECT_LT(seconds_since(start), 10.0) << "the creation waited for the store's timeout: " << message;
  EXPECT_EQ(message.find("rank 1/2 group 'shrunk': init timed out after "), 0u) << message;
  EXPECT_NE(message.find("waiting for the store to count this creation"), std::string::npos) << message;
  EXPECT_NE(message.find("the store did not answer in time (TCPStore: no reply to ADD"), std::string::npos) << message;
  EXPECT_NE(message.find("what was left before the deadline of the creation of rank 1/2 group 'shrunk'"), std::string::npos)
      << message;
  server.kill();
}

// The store stops answering (rank 0, which serves it, is stopped) during a phase whose
// creation checks a failure key: the wait ends by the creation's store deadline as init's
// own timeout, saying the store did not answer and who serves it, not with a bare "store
// CHECK not made" from whichever look the deadline refused.
TEST(InitWait, AStoreThatStopsAnsweringEndsTheWaitAsItsTimeoutNamingTheStore) {
  testing::ForkedStoreServer server;
  std::shared_ptr<TCPStore> store = server.client(milliseconds(60000));
  store->set("x", "1");
  server.stop();
  InitWait w = InitWait::starting_now(milliseconds(2000), milliseconds(60000), "rank 0/2 group 'g'");
  w.failure_store = store.get();
  w.failure_key = "pg/g/0/creation_failed";
  w.store_host = "rank 0";
  const auto start = Clock::now();
  std::string message = "nothing was thrown";
  try {
    wait_for_keys(*store, {"a0", "a1"}, {0, 1}, w, "to arrive", "the test's hint");
  } catch (const Timeout& e) {
    message = e.what();
  }
  // The deadline and the creation's store slack (2 s), with room for a loaded machine.
  EXPECT_LT(seconds_since(start), 7.0) << message;
  EXPECT_EQ(message.find("rank 0/2 group 'g': init timed out after "), 0u) << message;
  EXPECT_NE(message.find("to arrive: the store did not answer in time ("), std::string::npos) << message;
  EXPECT_NE(message.find("; rank 0 serves it: is that process stopped?"), std::string::npos) << message;
  server.kill();
}

// Another thread of this process holds the store's one connection with a long wait of its
// own (the program's store.wait) while a creation waits: the creation's timeout says so,
// not that the store's server may be stopped (it is fine).
TEST(InitWait, AConnectionBusyWithAnotherThreadsWaitIsNotBlamedOnTheServer) {
  testing::ForkedStoreServer server;
  std::shared_ptr<TCPStore> store = server.client(milliseconds(60000));
  std::thread other([&] { EXPECT_THROW(store->wait({"never"}, milliseconds(6000)), Timeout); });
  std::this_thread::sleep_for(milliseconds(300));  // the other wait holds the connection now
  InitWait w = InitWait::starting_now(milliseconds(1000), milliseconds(60000), "rank 0/2 group 'g'");
  w.failure_store = store.get();
  w.failure_key = "pg/g/0/creation_failed";
  w.store_host = "rank 0";
  std::string message = "nothing was thrown";
  try {
    wait_for_keys(*store, {"a0", "a1"}, {0, 1}, w, "to arrive", "the test's hint");
  } catch (const Timeout& e) {
    message = e.what();
  }
  other.join();
  EXPECT_EQ(message.find("rank 0/2 group 'g': init timed out after "), 0u) << message;
  EXPECT_NE(message.find("this process's connection to the store stayed busy with another thread's request"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find("is that process stopped?"), std::string::npos) << message;
}

// new_group's meeting looks at its parent's failure board while members are missing; a look
// the creation's store deadline cut short is said as init's timeout there too (the context
// new_group adds to a parent's failure must not turn it into a bare "store CHECK not made").
TEST(InitWait, ANewGroupsLookAtItsParentThatTheStoreCutShortIsInitsTimeout) {
  HashStore store;
  const MemberLists lists("new_group([0, 1])", "pg/sub/lists/", {0, 1}, 0, "gloo",
                          [](const std::function<std::vector<int>()>&) {
                            throw internal::StoreCallCutShort(
                                "store CHECK not made: the deadline of the creation of rank 0/2 group 'sub' has passed");
                          });
  InitWait w = InitWait::starting_now(milliseconds(20000), milliseconds(60000), "rank 0/2 group 'sub'");
  w.store_host = "rank 0";
  std::string message = "nothing was thrown";
  try {
    lists.meet(store, "pg/sub", 0, w, "the test's store");
  } catch (const Timeout& e) {
    message = e.what();
  }
  EXPECT_EQ(message.find("rank 0/2 group 'sub': init timed out after "), 0u) << message;
  EXPECT_NE(message.find("the store did not answer in time (store CHECK not made"), std::string::npos) << message;
}

// A phase already done is still seen at the deadline: the arrival mark of a rank that comes
// last, just past its deadline, is still made (its store calls get a little slack), and the
// creation goes on, rather than failing on every rank.
TEST(GroupCreationStore, AnArrivalMarkMadeAtTheDeadlineStillCounts) {
  TCPStoreOptions so;
  so.is_server = true;
  so.timeout = milliseconds(20000);
  TCPStore store(so);
  store.set("pg/late/arrived/1", "1");
  InitWait w = InitWait::starting_now(milliseconds(20000), milliseconds(10000), "rank 0/2 group 'late'");
  w.deadline = Clock::now() - milliseconds(1);
  EXPECT_NO_THROW(wait_for_arrivals(store, "pg/late/", 0, 2, w, "the test's store"));
  EXPECT_TRUE(store.check({"pg/late/arrived/0"}));
}

}  // namespace
}  // namespace distcomm
