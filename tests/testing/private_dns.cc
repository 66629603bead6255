#include "tests/testing/private_dns.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

#include "tests/testing/multiprocess.h"
#include "tests/testing/require.h"

namespace distcomm {
namespace testing {
namespace {

int bound_socket(int type) {
  const int fd = ::socket(AF_INET, type, 0);
  const int on = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(53);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0) return -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || (type == SOCK_STREAM && ::listen(fd, 8) != 0)) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

bool can_make_private_dns() {
  const pid_t pid = ::fork();
  // UTS too: take_host_name's (a test that needs it skips where it cannot be had).
  if (pid == 0) ::_exit(::unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWUTS) == 0 ? 0 : 1);
  int status = 0;
  return pid > 0 && ::waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

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

void enter_namespaces_with_a_silent_dns_server(const std::string& dir) {
  enter_namespaces(dir);
  if (::testing::Test::HasFatalFailure()) return;
  ASSERT_GE(bound_socket(SOCK_DGRAM), 0) << std::strerror(errno);
  ASSERT_GE(bound_socket(SOCK_STREAM), 0) << std::strerror(errno);
}

void take_host_name(const std::string& dir, const std::string& name, const std::string& hosts_lines) {
  ASSERT_EQ(::unshare(CLONE_NEWUTS), 0) << std::strerror(errno);
  ASSERT_EQ(::sethostname(name.data(), name.size()), 0) << std::strerror(errno);
  const std::string hosts = dir + "/hosts";
  std::ofstream(hosts) << "127.0.0.1 localhost\n::1 localhost\n" << hosts_lines;
  ASSERT_EQ(::mount(hosts.c_str(), "/etc/hosts", nullptr, MS_BIND, nullptr), 0) << std::strerror(errno);
}

void serve_slow_dns(std::chrono::milliseconds delay, int answers) {
  const int fd = bound_socket(SOCK_DGRAM);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  std::thread([fd, delay, answers] {
    for (int answered = 0;;) {
      std::vector<unsigned char> q(512);
      sockaddr_in from{};
      socklen_t len = sizeof(from);
      const ssize_t n = ::recvfrom(fd, q.data(), q.size(), 0, reinterpret_cast<sockaddr*>(&from), &len);
      if (n < 17) continue;
      if (answers >= 0 && answered >= answers) continue;  // silent from now on
      ++answered;
      q.resize(static_cast<size_t>(n));
      // Each query is answered `delay` after it came, on a thread of its own: answered one
      // after another, a query queued behind others waited their delays too, and a test's
      // deadline counted from its own query was missed on a loaded machine.
      std::thread([fd, delay, q, from, len] {
        std::this_thread::sleep_for(delay);
        // The question's name ends at its zero byte; its type follows.
        size_t at = 12;
        while (at < q.size() && q[at] != 0) at += q[at] + 1;
        const size_t question_end = at + 5;  // the zero byte, type, class
        if (question_end > q.size()) return;
        const bool a = q[at + 1] == 0 && q[at + 2] == 1;
        std::vector<unsigned char> r(q.begin(), q.begin() + static_cast<long>(question_end));
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
          ::sendto(fd, r.data(), r.size(), 0, reinterpret_cast<const sockaddr*>(&from), len);
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
      }).detach();
    }
  }).detach();
}

void PrivateDnsTest::SetUp() {
  if (::geteuid() != 0 || !can_make_private_dns()) {
    DISTCOMM_SKIP_WITHOUT("netns") << "needs mount and network namespaces (root): unshare fails here";
  }
  dir_ = make_temp_dir();
}

void PrivateDnsTest::TearDown() {
  if (!dir_.empty()) remove_temp_dir(dir_);
}

}  // namespace testing
}  // namespace distcomm
