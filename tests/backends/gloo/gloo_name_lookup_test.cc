// The gloo plugin looks the names it listens by (config 'hostname', the route to
// master_addr, this host's name) up by the group's init deadline, through the core's
// distcomm_resolve (api/plugin/name_resolution.h), and hands gloo the numeric address: a DNS
// server that does not answer costs the deadline, named, not the resolver's retries -- and
// gloo's own lookup, which has no deadline, never runs. The silent DNS server is the
// test's own (private_dns.h): there one getaddrinfo of a name takes 10 s or more.

#include <chrono>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "api/errors.h"
#include "api/process_group.h"
#include "api/store/hash_store.h"
#include "api/tensor.h"
#include "tests/testing/multiprocess.h"
#include "tests/testing/private_dns.h"

namespace distcomm {
namespace {

using std::chrono::milliseconds;

class GlooSilentDns : public testing::PrivateDnsTest {
 protected:
  static constexpr milliseconds kTimeout{2000};

  // A group of one over gloo with `config` and a 2 s timeout.
  static ProcessGroupPtr group_of_one(const std::map<std::string, std::string>& config) {
    auto store = std::make_shared<HashStore>();
    store->set_timeout(kTimeout);
    ProcessGroupOptions o;
    o.store = store;
    o.size = 1;
    o.backend = "gloo";
    o.timeout = kTimeout;
    o.backend_config = config;
    return ProcessGroup::create(o);
  }

  // The group of one, created in the silent DNS's namespaces (and, when host_name is given,
  // with that host name, which /etc/hosts does not list): the InvalidArgument it fails
  // with, and how long that took.
  void expect_refusal_by_the_deadline(const std::map<std::string, std::string>& config, const std::string& words,
                                      const std::string& host_name = "") {
    testing::run_ranks(1, [&](int, int) {
      testing::enter_namespaces_with_a_silent_dns_server(dir());
      if (::testing::Test::HasFatalFailure()) return;
      if (!host_name.empty()) testing::take_host_name(dir(), host_name, "");
      if (::testing::Test::HasFatalFailure()) return;
      const auto start = std::chrono::steady_clock::now();
      std::string message = "no InvalidArgument";
      try {
        group_of_one(config);
      } catch (const InvalidArgument& e) {
        message = e.what();
      }
      const auto took = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start);
      EXPECT_NE(message.find(words), std::string::npos) << message;
      EXPECT_NE(message.find("had no answer after"), std::string::npos) << message;
      EXPECT_NE(message.find("(by the group's init deadline)"), std::string::npos) << message;
      // The resolver alone would take 10 s or more.
      EXPECT_GE(took.count(), 1500) << "ms; " << message;
      EXPECT_LT(took.count(), 5000) << "ms; " << message;
    });
  }
};

TEST_F(GlooSilentDns, AHostnameWhoseNameHasNoAnswerIsRefusedByTheInitDeadline) {
  expect_refusal_by_the_deadline({{"hostname", "node.distcomm-test"}},
                                 "gloo cannot listen on address node.distcomm-test (config 'hostname'): "
                                 "'node.distcomm-test' does not resolve (looking up the name 'node.distcomm-test'");
}

TEST_F(GlooSilentDns, AMasterWhoseNameHasNoAnswerIsRefusedByTheInitDeadline) {
  expect_refusal_by_the_deadline({{"master_addr", "master.distcomm-test"}},
                                 "cannot resolve master address 'master.distcomm-test': looking up the name "
                                 "'master.distcomm-test'");
}

// With nothing given, gloo listens by this host's name: a lookup of it that gets no answer
// by the deadline is the group's failure, named, not a silent fall back to the loopback
// (which peers on other hosts could not reach).
TEST_F(GlooSilentDns, AHostNameWithNoAnswerIsRefusedByTheInitDeadline) {
  expect_refusal_by_the_deadline({},
                                 "gloo cannot listen on host name box.distcomm-test: 'box.distcomm-test' does not "
                                 "resolve (looking up the name 'box.distcomm-test'",
                                 "box.distcomm-test");
}

// A host name that resolves, but to no address of this host (a container's name in a
// hosts file of another network), is no failure: gloo listens on the loopback, at once.
TEST_F(GlooSilentDns, AHostNameOfAnotherAddressFallsBackToTheLoopback) {
  testing::run_ranks(1, [&](int, int) {
    testing::enter_namespaces_with_a_silent_dns_server(dir());
    if (::testing::Test::HasFatalFailure()) return;
    testing::take_host_name(dir(), "box.distcomm-test", "10.99.0.1 box.distcomm-test\n");
    if (::testing::Test::HasFatalFailure()) return;
    const auto start = std::chrono::steady_clock::now();
    ProcessGroupPtr pg = group_of_one({});
    Tensor x = Tensor::of({2.0f});
    pg->all_reduce(x)->wait();
    EXPECT_EQ(x.item(), 2.0f);
    const auto took = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start);
    EXPECT_LT(took.count(), 1500) << "ms: the hosts file answers; nothing waits for the silent DNS server";
  });
}

}  // namespace
}  // namespace distcomm
