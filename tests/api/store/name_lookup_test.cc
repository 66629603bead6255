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
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

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

// In this (forked) process: new namespaces whose DNS server is 127.0.0.1:53, which nothing
// serves yet. Fails the test when a step fails.
void enter_namespaces(const std::string& dir) {
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
}

// As enter_namespaces, with a DNS server that never answers: sockets that read nothing,
// open for the process's life.
void enter_namespaces_with_a_silent_dns_server(const std::string& dir) {
  enter_namespaces(dir);
  if (::testing::Test::HasFatalFailure()) return;
  ASSERT_GE(bound_socket(SOCK_DGRAM), 0) << std::strerror(errno);
  ASSERT_GE(bound_socket(SOCK_STREAM), 0) << std::strerror(errno);
}

// A DNS server on this namespace's 127.0.0.1:53 (enter_namespaces) that answers every query
// after `delay`: 127.0.0.1 for an A query, no address for any other. Runs on a thread of its
// own for the process's life.
void serve_slow_dns(std::chrono::milliseconds delay) {
  const int fd = bound_socket(SOCK_DGRAM);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  std::thread([fd, delay] {
    unsigned char q[512];
    for (;;) {
      sockaddr_in from{};
      socklen_t len = sizeof(from);
      const ssize_t n = ::recvfrom(fd, q, sizeof(q), 0, reinterpret_cast<sockaddr*>(&from), &len);
      if (n < 17) continue;
      std::this_thread::sleep_for(delay);
      // The question's name ends at its zero byte; its type follows.
      size_t at = 12;
      while (at < static_cast<size_t>(n) && q[at] != 0) at += q[at] + 1;
      const size_t question_end = at + 5;  // the zero byte, type, class
      if (question_end > static_cast<size_t>(n)) continue;
      const bool a = q[at + 1] == 0 && q[at + 2] == 1;
      std::vector<unsigned char> r(q, q + question_end);
      r[2] = 0x81;  // a response, recursion desired
      r[3] = 0x80;  // recursion available, no error
      r[6] = 0;
      r[7] = a ? 1 : 0;  // answers
      r[8] = r[9] = r[10] = r[11] = 0;
      if (a) {
        const unsigned char answer[] = {0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 127, 0, 0, 1};
        r.insert(r.end(), answer, answer + sizeof(answer));
      }
      // Three times: a forked child's resolver may share its parent's socket, and a copy
      // the other process reads (and drops, its ID not being that one's) is lost to this one.
      for (int copy = 0; copy < 3; ++copy) {
        ::sendto(fd, r.data(), r.size(), 0, reinterpret_cast<sockaddr*>(&from), len);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  }).detach();
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

// A child forked while its parent's lookup of a name is under way (spawn's ranks, a data
// loader) has no thread of that lookup: it must look the name up itself, not join the
// parent's and wait out its deadline for an answer that never comes there.
TEST_F(SilentDns, AChildForkedDuringALookupLooksTheNameUpItself) {
  testing::run_ranks(1, [&](int, int) {
    enter_namespaces(dir_);
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
