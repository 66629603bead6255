// An elastic launcher whose --rdzv_endpoint is a name that its DNS server does not answer
// for: it refuses the flag by --rdzv_timeout_s, naming the lookup, where getaddrinfo alone
// would hold it for the resolver's timeouts (launch/elastic_options.cc, name_lookup.h).
// The silent DNS server is the test's own (private_dns.h): there one getaddrinfo of a name
// takes 10 s or more.
#include <gtest/gtest.h>

#include <chrono>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "tests/testing/multiprocess.h"
#include "tests/testing/private_dns.h"
#include "tests/testing/test_files.h"
#include "tests/tools/launch/launcher_harness.h"

namespace distcomm {
namespace testing {
namespace {

const auto* const kAdoptOrphans = ::testing::AddGlobalTestEnvironment(new AdoptOrphans);

class ElasticNameLookup : public PrivateDnsTest {};

// An elastic launcher whose endpoint is store.distcomm-test:29400, with a 2 s rendezvous
// timeout, and how long it ran.
std::pair<Finished, std::chrono::milliseconds> launch_with_a_named_endpoint() {
  const auto start = std::chrono::steady_clock::now();
  Finished f = run({launcher_path(), "--nnodes=1:2", "--rdzv_endpoint=store.distcomm-test:29400", "--rdzv_timeout_s=2",
                    "--", rank_probe_path(), "env"},
                   std::chrono::seconds(60), {"DISTCOMM_STORE_TOKEN=elastic-name-lookup-test"});
  return {std::move(f), std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start)};
}

// `prefix`, then the lookup's "had no answer after" the 2 s rendezvous timeout: the lookup
// starts a moment after the launcher, so it may have waited 1.99x s of it ("after 2" failed
// on "after 1.999 s").
bool no_answer_after_the_timeout(const std::string& err, const std::string& prefix) {
  const std::string said = prefix + "looking up the name 'store.distcomm-test' had no answer after ";
  const size_t at = err.find(said);
  if (at == std::string::npos) return false;
  static const std::regex about_2_s(R"((1\.9\d*|2(\.\d+)?) s .*)");
  const size_t end = err.find('\n', at);
  return std::regex_match(err.substr(at + said.size(), end == std::string::npos ? std::string::npos : end - at - said.size()),
                          about_2_s);
}

TEST_F(ElasticNameLookup, AnEndpointWhoseNameHasNoAnswerIsRefusedByTheRendezvousTimeout) {
  run_ranks(1, [&](int, int) {
    enter_namespaces_with_a_silent_dns_server(dir());
    if (::testing::Test::HasFatalFailure()) return;
    const auto [f, took] = launch_with_a_named_endpoint();
    EXPECT_EQ(exit_code(f), 2) << f.err;
    EXPECT_TRUE(no_answer_after_the_timeout(f.err, "--rdzv_endpoint=store.distcomm-test:29400: cannot resolve "
                                                   "'store.distcomm-test': "))
        << f.err;
    EXPECT_NE(f.err.find("(--rdzv_timeout_s)"), std::string::npos) << f.err;
    EXPECT_EQ(f.out, "") << "nothing may start";
    // The resolver alone would take 10 s or more (private_dns.h).
    EXPECT_LT(took.count(), 6000) << "ms; " << f.err;
  });
}

// The flag's check found the name, and the next lookup (whether this host is the endpoint's)
// has no answer: the launcher says so, rather than take the endpoint for another host (its
// own launcher would then serve no store, and every launcher would wait out its timeout
// blaming the endpoint's host).
TEST_F(ElasticNameLookup, AnEndpointWhoseNameStopsAnsweringIsNotTakenForAnotherHost) {
  run_ranks(1, [&](int, int) {
    enter_namespaces(dir());
    if (::testing::Test::HasFatalFailure()) return;
    serve_slow_dns(std::chrono::milliseconds(0), /*answers=*/2);  // the A and AAAA of one lookup
    if (::testing::Test::HasFatalFailure()) return;
    const auto [f, took] = launch_with_a_named_endpoint();
    EXPECT_NE(exit_code(f), 0) << f.err;
    EXPECT_TRUE(no_answer_after_the_timeout(
        f.err, "cannot tell whether this host is the rendezvous endpoint 'store.distcomm-test': "))
        << f.err;
    EXPECT_EQ(f.err.find("is the launcher of the endpoint's host running?"), std::string::npos) << f.err;
    EXPECT_EQ(f.out, "") << "nothing may start";
    EXPECT_LT(took.count(), 6000) << "ms; " << f.err;
  });
}

}  // namespace
}  // namespace testing
}  // namespace distcomm
