// A store named by a host name whose DNS server does not answer (name_lookup.h): the client
// gives up by its own deadline and names the lookup, where getaddrinfo alone would hold it
// for the resolver's timeouts. The DNS servers are the test's own (private_dns.h): one
// getaddrinfo of a name takes 10 s or more where the server is silent.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "api/errors.h"
#include "api/init.h"
#include "api/store/internal/name_lookup.h"
#include "api/store/tcp_store.h"
#include "tests/api/store/store_test_util.h"
#include "tests/testing/multiprocess.h"
#include "tests/testing/private_dns.h"
#include "tests/testing/require.h"
#include "tests/testing/threads.h"

namespace distcomm {
namespace {

using namespace std::chrono_literals;
using internal::look_up;
using testing::client_of;
using testing::error_of;
using internal::NameLookup;
using testing::enter_namespaces;
using testing::enter_namespaces_with_a_silent_dns_server;
using testing::serve_slow_dns;

class SilentDns : public testing::PrivateDnsTest {};

TEST_F(SilentDns, AStoreClientGivesUpByItsDeadlineAndNamesTheLookup) {
  testing::run_ranks(1, [&](int, int) {
    enter_namespaces_with_a_silent_dns_server(dir());
    if (::testing::Test::HasFatalFailure()) return;
    const auto [message, took] = error_of<StoreError>([&] {
      TCPStoreOptions o = client_of(29500, 2s);
      o.host = "store.distcomm-test";
      TCPStore s(o);
    });
    EXPECT_NE(message.find("cannot connect to store.distcomm-test:29500 after 2 s"), std::string::npos) << message;
    EXPECT_NE(message.find("looking up the name 'store.distcomm-test' had no answer"), std::string::npos) << message;
    // The resolver alone would take 10 s (resolv.conf above).
    EXPECT_GE(took.count(), 1900) << "ms; " << message;
    EXPECT_LT(took.count(), 4000) << "ms; " << message;
  });
}

TEST_F(SilentDns, ALookupThatRanOutOfTimeLeavesTheCallerFreeAndANumericAddressNeedsNoDns) {
  testing::run_ranks(1, [&](int, int) {
    enter_namespaces_with_a_silent_dns_server(dir());
    if (::testing::Test::HasFatalFailure()) return;
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    const auto start = std::chrono::steady_clock::now();
    NameLookup late = look_up("peer.distcomm-test", "80", hints, start + 500ms);
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
    EXPECT_TRUE(late.timed_out);
    EXPECT_FALSE(late.found);
    EXPECT_LT(took.count(), 2000) << "ms";
    EXPECT_NE(late.error.find("had no answer after"), std::string::npos) << late.error;
    // An address is answered at once, DNS or not, even with no time left.
    NameLookup numeric = look_up("127.0.0.1", "80", hints, std::chrono::steady_clock::now());
    ASSERT_TRUE(numeric.found) << numeric.error;
    EXPECT_FALSE(numeric.timed_out);
  });
}

// A child forked while its parent's lookup of a name is under way (spawn's ranks, a data
// loader) has no thread of that lookup: it must look the name up itself, not join the
// parent's and wait out its deadline for an answer that never comes there.
TEST_F(SilentDns, AChildForkedDuringALookupLooksTheNameUpItself) {
  testing::run_ranks(1, [&](int, int) {
    enter_namespaces(dir());
    if (::testing::Test::HasFatalFailure()) return;
    serve_slow_dns(1000ms);
    if (::testing::Test::HasFatalFailure()) return;
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    // Left at 100 ms: the lookup goes on, on its thread, until the answer comes at 1 s.
    NameLookup early = look_up("store.distcomm-test", "80", hints, std::chrono::steady_clock::now() + 100ms);
    ASSERT_TRUE(early.timed_out) << early.error;
    const pid_t child = ::fork();
    if (child == 0) {
      NameLookup own = look_up("store.distcomm-test", "80", hints, std::chrono::steady_clock::now() + 4s);
      std::fprintf(stderr, "child: %s\n", own.found ? "found" : own.error.c_str());
      ::_exit(own.found ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child did not find the name (its stderr says why)";
    // And the parent's own next lookup joins nothing stale either: the answer came.
    NameLookup later = look_up("store.distcomm-test", "80", hints, std::chrono::steady_clock::now() + 4s);
    EXPECT_TRUE(later.found) << later.error << " (early: " << early.error << ")";
  });
}

// init's wait for the store's server probes it every report interval: the probes join the
// one lookup under way (one thread, not one per probe), and init's Timeout says what the
// last attempt met, not only the causes it cannot tell apart.
TEST_F(SilentDns, InitWaitingForAStoreByANameThatHasNoAnswerSaysSoAtItsDeadline) {
  testing::run_ranks(1, [&](int, int) {
    enter_namespaces_with_a_silent_dns_server(dir());
    if (::testing::Test::HasFatalFailure()) return;
    InitOptions o;
    o.backend = "gloo";
    o.rank = 1;
    o.world_size = 2;
    o.init_method = "tcp://store.distcomm-test:29500";
    o.timeout = 3s;
    o.init_report_interval = 500ms;
    const auto [message, took] = error_of<Timeout>([&] { init_process_group(o); });
    EXPECT_NE(message.find("to start the store at store.distcomm-test:29500"), std::string::npos) << message;
    EXPECT_NE(message.find("the last attempt: TCPStore: cannot connect to store.distcomm-test:29500"), std::string::npos)
        << message;
    EXPECT_NE(message.find("looking up the name 'store.distcomm-test' had no answer"), std::string::npos) << message;
    EXPECT_LT(took.count(), 5000) << "ms; " << message;
    EXPECT_LE(testing::threads_named("dc-name-lookup"), 1) << "the probes did not join the lookup under way";
  });
}

}  // namespace
}  // namespace distcomm
