// init_process_group over gloo ends within its timeout whoever is missing, says every
// report interval whom it waits for, and names them when it gives up.
//
// The ranks are real processes meeting through a FileStore (or rank 0's TCPStore). The
// "stale address" cases put a third rank's entries in the store by hand, as a rank that
// published its gloo addresses and then went away would have left them: those addresses
// are real gloo pairs', made and then closed, so nothing listens there any more.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <gloo/transport/context.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/tcp/device.h>
#include <gtest/gtest.h>

#include "api/errors.h"
#include "api/store/file_store.h"
#include "api/group/init_wait.h"
#include "api/init.h"
#include "tests/testing/captured_stderr.h"
#include "tests/testing/failure_checks.h"
#include "tests/testing/multiprocess.h"
#include "tests/testing/test_files.h"
#include "tests/testing/threads.h"

namespace distcomm {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kTimeout{3000};
constexpr milliseconds kReportEvery{500};
// The bound: init ends no later than its timeout plus 5 s.
constexpr double kMaxSeconds = 3.0 + 5.0;

// A fresh path for a FileStore.
std::string temp_store_path() {
  char path[] = "/tmp/distcomm_init_deadline_XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd >= 0) ::close(fd);
  ::unlink(path);
  return path;
}

InitOptions options_for(int rank, int world, const std::string& init_method) {
  InitOptions o;
  o.backend = "gloo";
  o.rank = rank;
  o.world_size = world;
  o.init_method = init_method;
  o.timeout = kTimeout;
  o.init_report_interval = kReportEvery;
  return o;
}

// Runs init, expects E within [timeout, timeout + 5 s] (from_s..to_s when given), and
// that the Timeout's message and the lines logged while waiting name `waited_for`.
template <typename E>
std::string expect_init_fails(const InitOptions& o, const std::string& waited_for, double from_s, double to_s,
                              std::string* logged) {
  testing::CapturedStderr err;
  const std::string msg = testing::expect_failure_within<E>([&] { init_process_group(o); }, from_s, to_s, "init");
  *logged = err.text();
  std::fprintf(stderr, "rank %d logged:\n%s", o.rank, logged->c_str());
  EXPECT_NE(msg.find(waited_for), std::string::npos) << msg;
  return msg;
}

TEST(GlooInitDeadline, RankThatNeverCallsInitIsNamedEveryIntervalAndAtTheTimeout) {
  const std::string path = temp_store_path();
  testing::run_ranks(3, [&](int rank, int world) {
    if (rank == 2) return;  // never calls init
    std::string logged;
    const std::string msg = expect_init_fails<Timeout>(options_for(rank, world, "file://" + path),
                                                       "waiting for ranks [2] to arrive at the store", 2.9, kMaxSeconds,
                                                       &logged);
    EXPECT_NE(msg.find("rank " + std::to_string(rank) + "/3 group 'world'"), std::string::npos) << msg;
    // Every 0.5 s of the 3 s: at least the first few said so, naming rank 2.
    EXPECT_NE(logged.find("init has waited"), std::string::npos) << logged;
    EXPECT_NE(logged.find("for ranks [2] to arrive at the store"), std::string::npos) << logged;
  });
  ::unlink(path.c_str());
}

TEST(GlooInitDeadline, MissingStoreServerNamesRankZero) {
  // A port that is bound and not listening: connections to it are refused, as to a rank 0
  // that has not started yet.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const std::string where = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  std::string logged;
  expect_init_fails<Timeout>(options_for(1, 3, "tcp://" + where), "waiting for ranks [0] to start the store at " + where,
                             2.9, kMaxSeconds, &logged);
  EXPECT_NE(logged.find("for ranks [0] to start the store at " + where), std::string::npos) << logged;
  ::close(fd);
  destroy_process_group();
}

// What a rank `stale` that arrived, published its gloo addresses on `host` and went away
// leaves in the store of a world of 3: real addresses of pairs that no longer listen.
void leave_stale_rank(const std::string& path, const std::string& host, int stale = 2) {
  FileStore store(path, 3, "");
  const std::string rank = std::to_string(stale);
  store.add("pg/world/made_by/" + rank, 1);
  store.set("pg/world/arrived/" + rank, std::string("1"));
  ::gloo::transport::tcp::attr attr;
  attr.hostname = host;
  auto device = ::gloo::transport::tcp::CreateDevice(attr);
  auto context = device->createContext(stale, 3);
  Store::Bytes addresses;
  for (int peer = 0; peer < 3; ++peer) {
    if (peer == stale) continue;
    const std::vector<char> bytes = context->createPair(peer)->address().bytes();
    addresses.insert(addresses.end(), bytes.begin(), bytes.end());
  }
  // Then its process (gloo_rendezvous.cc): none here, an empty text of length 0.
  addresses.insert(addresses.end(), 4, 0);
  store.set("pg/world/cpu/gloo/addresses/" + rank, addresses);
}  // the pairs close here

void leave_stale_rank_two(const std::string& path, const std::string& host) { leave_stale_rank(path, host, 2); }

TEST(GlooInitDeadline, PeerThatPublishedAndNeverConnectsIsNamedAtTheTimeout) {
  // Rank 2's addresses sort above ranks 0 and 1's (127.0.0.2 > 127.0.0.1), so they are the
  // listening side: gloo alone waits five times the timeout for rank 2 to connect.
  const std::string path = temp_store_path();
  leave_stale_rank_two(path, "127.0.0.2");
  testing::run_ranks(2, [&](int rank, int) {
    InitOptions o = options_for(rank, 3, "file://" + path);
    o.backend_config["hostname"] = "127.0.0.1";
    std::string logged;
    expect_init_fails<Timeout>(o, "waiting for ranks [2] to connect with this rank", 2.9, kMaxSeconds, &logged);
    EXPECT_NE(logged.find("for ranks [2] to connect with this rank"), std::string::npos) << logged;
  });
  ::unlink(path.c_str());
}

using testing::threads_named;

// A bad DISTCOMM_STALL_REPORT_SECONDS fails init on every rank alike, before anything is
// sent: no rank gets as far as its backend (whose stall watch reads it again) and so none
// sees a peer's connections close.
TEST(GlooInitDeadline, ABadStallReportIntervalFailsInitOnEveryRankBeforeItConnects) {
  const std::string path = temp_store_path();
  testing::run_ranks(2, [&](int rank, int world) {
    ::setenv("DISTCOMM_STALL_REPORT_SECONDS", "soon", 1);
    // The program's own store, kept after init fails: what init wrote there shows.
    InitOptions o = options_for(rank, world, "");
    o.store = std::make_shared<FileStore>(path);
    const auto start = std::chrono::steady_clock::now();
    try {
      init_process_group(o);
      ADD_FAILURE() << "init succeeded with DISTCOMM_STALL_REPORT_SECONDS=soon";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("DISTCOMM_STALL_REPORT_SECONDS='soon'"), std::string::npos) << e.what();
    }
    // Before the store: a rank that waited for its peer at the store would take 3 s.
    EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(1000));
    EXPECT_EQ(threads_named("dc-gloo-worker"), 0) << "a backend was made";
    // Nothing was sent: no rank claimed its place at the store or started a rendezvous.
    EXPECT_EQ(o.store->num_keys(), 0) << "rank " << rank << " reached the store before refusing the variable";
  });
  ::unlink(path.c_str());
}

// A backend that fails after its worker started leaves no worker thread behind (no
// destructor runs for a half-made backend, and the worker holds itself until stopped:
// helper-60's review), and says its failure before its connections close: a peer still
// completing its side of the rendezvous reports that failure, not "connection closed by
// peer" (CI, stop 55: rank 0 did, one run in ten). The failure here: the variable changed
// after init checked it, so each subgroup's stall watch refuses it after the rendezvous.
TEST(GlooInitDeadline, ABackendThatFailsAfterItsWorkerStartedLeavesNoWorkerAndItsPeersNameTheCause) {
  const std::string path = temp_store_path();
  testing::run_ranks(2, [&](int rank, int world) {
    ::unsetenv("DISTCOMM_STALL_REPORT_SECONDS");
    ProcessGroupPtr pg = init_process_group(options_for(rank, world, "file://" + path));
    ::setenv("DISTCOMM_STALL_REPORT_SECONDS", "soon", 1);
    for (int round = 0; round < 5; ++round) {
      try {
        pg->new_group({0, 1});
        ADD_FAILURE() << "new_group succeeded with DISTCOMM_STALL_REPORT_SECONDS=soon";
      } catch (const InvalidArgument& e) {
        // Its own watch's refusal.
        EXPECT_NE(std::string(e.what()).find("DISTCOMM_STALL_REPORT_SECONDS='soon'"), std::string::npos) << e.what();
      } catch (const Error& e) {
        // The peer's, which failed first and closed its connections: named as the cause.
        EXPECT_NE(std::string(e.what()).find("DISTCOMM_STALL_REPORT_SECONDS='soon'"), std::string::npos) << e.what();
      }
      std::this_thread::sleep_for(milliseconds(200));
      EXPECT_EQ(threads_named("dc-gloo-worker"), 1) << "a failed backend's worker thread lives on (the world's is one)";
    }
    ::unsetenv("DISTCOMM_STALL_REPORT_SECONDS");
  });
  ::unlink(path.c_str());
}

TEST(GlooInitDeadline, PeerWhoseAddressRefusesIsAPeerFailureNamingIt) {
  // Now ranks 0 and 1 sort above rank 2 and connect to it: refused at once, as a process that
  // has gone; no need to wait for the timeout.
  const std::string path = temp_store_path();
  leave_stale_rank_two(path, "127.0.0.1");
  testing::run_ranks(2, [&](int rank, int) {
    InitOptions o = options_for(rank, 3, "file://" + path);
    o.timeout = std::chrono::seconds(60);
    o.backend_config["hostname"] = "127.0.0.2";
    std::string logged;
    const std::string msg =
        expect_init_fails<PeerFailure>(o, "cannot connect to rank 2", 0, 20, &logged);
    EXPECT_NE(msg.find("Connection refused"), std::string::npos) << msg;
  });
  ::unlink(path.c_str());
}

// A rank that fails its part of the rendezvous says why before it closes its connections
// (InitWait::say_creation_failed); a peer then refused by it reports that first failure,
// not the refusal it caused, and no rank names another refused one as the first. Rank 0
// here is such a rank, left by hand as it leaves the store: its addresses, of pairs since
// closed, and its failure in the gloo rendezvous's namespace and the group's. Ranks 1 and
// 2 sort above it and connect to it: refused at once.
TEST(GlooInitDeadline, RankRefusedByOneThatFailedFirstReportsThatFailure) {
  const std::string path = temp_store_path();
  leave_stale_rank(path, "127.0.0.1", 0);
  const std::string cause = "rank 0/3 group 'world' (gloo): the failure this test left for rank 0";
  {
    FileStore store(path, 3, "");
    const std::string record = encode_creation_failure(0, std::make_exception_ptr(PeerFailure(cause)));
    store.set("pg/world/cpu/gloo/" + std::string(kCreationFailedKey), record);
    store.set("pg/world/" + std::string(kCreationFailedKey), record);
  }
  testing::run_ranks(2, [&](int index, int) {
    InitOptions o = options_for(index + 1, 3, "file://" + path);
    o.timeout = std::chrono::seconds(60);
    o.backend_config["hostname"] = "127.0.0.2";
    std::string logged;
    const std::string msg =
        expect_init_fails<PeerFailure>(o, "the group's creation failed on rank 0: " + cause, 0, 20, &logged);
    // The refusal says how this rank learned of it, after what this rank was doing.
    EXPECT_NE(msg.find("rank " + std::to_string(index + 1) + "/3 group 'world'"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("first on rank"), std::string::npos) << "rank 0 failed first, and said so: " << msg;
  });
  ::unlink(path.c_str());
}

// A rank whose backend cannot start (a bad setting on that rank alone) fails at once with
// its own error; the others, waiting for its gloo addresses, learn it from the store
// within about a second instead of waiting out the 60 s timeout, and quote it.
TEST(GlooInitDeadline, RankWhoseBackendFailsEndsTheOthersWaitWithItsError) {
  const std::string path = temp_store_path();
  testing::run_ranks(3, [&](int rank, int world) {
    InitOptions o = options_for(rank, world, "file://" + path);
    o.timeout = std::chrono::seconds(60);
    if (rank == 0) {
      o.backend_config["hostname"] = "no-such-host.invalid";
      std::string logged;
      expect_init_fails<InvalidArgument>(o, "no-such-host.invalid", 0, 10, &logged);
      return;
    }
    std::string logged;
    const std::string msg = expect_init_fails<PeerFailure>(o, "the group's creation failed on rank 0: ", 0, 10, &logged);
    EXPECT_NE(msg.find("no-such-host.invalid"), std::string::npos) << msg;
  });
  ::unlink(path.c_str());
}

// new_group counts its own deadline (the parent's timeout) from the call, and names the
// member that never made the call.
TEST(GlooInitDeadline, MemberThatNeverCallsNewGroupIsNamedByGroupAndWorldRank) {
  testing::GroupHarnessOptions options;
  options.op_timeout = kTimeout;
  testing::run_group(3, "gloo", [](ProcessGroup& pg) {
    if (pg.rank() == 2) {
      testing::wait_for_done(pg, {0, 1});  // stays in the world group, never calls new_group
      return;
    }
    // World ranks 1 and 2 are ranks 0 and 1 of the subgroup; rank 0 is not a member.
    std::shared_ptr<ProcessGroup> sub;
    if (pg.rank() == 0) {
      EXPECT_EQ(pg.new_group({1, 2}), nullptr);
    } else {
      const std::string msg = testing::expect_failure_within<Timeout>(
          [&] { sub = pg.new_group({1, 2}); }, 2.9, kMaxSeconds, "new_group without world rank 2");
      // The waiting rank by its group rank and its world rank (world rank 1 is rank 0 of g0).
      EXPECT_NE(msg.find("rank 0/2 (world rank 1) group 'world/g0'"), std::string::npos) << "names the subgroup: " << msg;
      EXPECT_NE(msg.find("waiting for ranks [1] (world ranks [2]) to arrive at the store"), std::string::npos)
          << msg;
    }
    testing::mark_done(pg);
  }, options);
}

}  // namespace
}  // namespace distcomm
