// A store named by a host name whose DNS server does not answer (name_lookup.h): the client
// gives up by its own deadline and names the lookup, where getaddrinfo alone would hold it
// for the resolver's timeouts.
//
// The silent DNS server is built here. A child process in new mount and network namespaces
// (root) sees a resolv.conf of its own, bind-mounted over /etc/resolv.conf, whose one
// nameserver is its own 127.0.0.1:53: a UDP socket and a TCP listener that read nothing.
// Its "options timeout:10 attempts:1" makes one getaddrinfo of a name take 10 s or more.
// Nothing leaves the child's network namespace.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>

#include "api/errors.h"
#include "api/init.h"
#include "api/store/internal/name_lookup.h"
#include "api/store/tcp_store.h"
#include "tests/api/store/store_test_util.h"
#include "tests/testing/multiprocess.h"
#include "tests/testing/require.h"
#include "tests/testing/threads.h"

namespace distcomm {
namespace {

using namespace std::chrono_literals;
using internal::look_up;
using testing::client_of;
using testing::error_of;
using internal::NameLookup;

// Whether this process may make mount and network namespaces (a child tries).
bool can_unshare() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(::unshare(CLONE_NEWNS | CLONE_NEWNET) == 0 ? 0 : 1);
  int status = 0;
  return pid > 0 && ::waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int bound_socket(int type) {
  const int fd = ::socket(AF_INET, type, 0);
  const int on = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(53);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) return -1;
  if (type == SOCK_STREAM && ::listen(fd, 8) != 0) return -1;
  return fd;
}

// In this (forked) process: new namespaces whose DNS server, 127.0.0.1:53, never answers.
// The sockets stay open for the process's life. Fails the test when a step fails.
void enter_namespaces_with_a_silent_dns_server(const std::string& dir) {
  ASSERT_EQ(::unshare(CLONE_NEWNS | CLONE_NEWNET), 0) << std::strerror(errno);
  // The bind mount below must not reach the machine's own mount namespace.
  ASSERT_EQ(::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr), 0) << std::strerror(errno);
  const std::string conf = dir + "/resolv.conf";
  std::ofstream(conf) << "nameserver 127.0.0.1\noptions timeout:10 attempts:1\n";
  ASSERT_EQ(::mount(conf.c_str(), "/etc/resolv.conf", nullptr, MS_BIND, nullptr), 0) << std::strerror(errno);
  // A new network namespace's loopback starts down.
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  ifreq lo{};
  std::strncpy(lo.ifr_name, "lo", IFNAMSIZ - 1);
  ASSERT_EQ(::ioctl(fd, SIOCGIFFLAGS, &lo), 0) << std::strerror(errno);
  lo.ifr_flags |= IFF_UP;
  ASSERT_EQ(::ioctl(fd, SIOCSIFFLAGS, &lo), 0) << std::strerror(errno);
  ::close(fd);
  ASSERT_GE(bound_socket(SOCK_DGRAM), 0) << std::strerror(errno);
  ASSERT_GE(bound_socket(SOCK_STREAM), 0) << std::strerror(errno);
}

class SilentDns : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0 || !can_unshare()) {
      DISTCOMM_SKIP_WITHOUT("netns") << "needs mount and network namespaces (root): unshare fails here";
    }
    dir_ = testing::make_temp_dir();
  }
  void TearDown() override {
    if (!dir_.empty()) testing::remove_temp_dir(dir_);
  }
  std::string dir_;
};

TEST_F(SilentDns, AStoreClientGivesUpByItsDeadlineAndNamesTheLookup) {
  testing::run_ranks(1, [&](int, int) {
    enter_namespaces_with_a_silent_dns_server(dir_);
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
    enter_namespaces_with_a_silent_dns_server(dir_);
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

// init's wait for the store's server probes it every report interval: the probes join the
// one lookup under way (one thread, not one per probe), and init's Timeout says what the
// last attempt met, not only the causes it cannot tell apart.
TEST_F(SilentDns, InitWaitingForAStoreByANameThatHasNoAnswerSaysSoAtItsDeadline) {
  testing::run_ranks(1, [&](int, int) {
    enter_namespaces_with_a_silent_dns_server(dir_);
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
