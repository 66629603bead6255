// A gloo group that reaches one of its process's limits -- threads (ulimit -u), file
// descriptors (ulimit -n) -- fails with an error that names the limit to raise, on the rank
// that reached it, and nothing terminates: not "std::terminate was called without an
// exception", not an address or a peer blamed for it.
#include <dirent.h>
#include <sys/resource.h>
#include <pthread.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "api/errors.h"
#include "backends/gloo/gloo_limits.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace {

using gloo::LimitKind;
using gloo::limit_failure;
using gloo::limit_in_message;
using gloo::limit_of_errno;

// --- which failures are limits ---

TEST(GlooLimits, ErrnosOfLimitsAndOfAddresses) {
  EXPECT_EQ(limit_of_errno(EMFILE), LimitKind::kDescriptors);
  EXPECT_EQ(limit_of_errno(ENFILE), LimitKind::kDescriptors);
  EXPECT_EQ(limit_of_errno(EAGAIN), LimitKind::kThreads);
  EXPECT_EQ(limit_of_errno(ENOMEM), LimitKind::kThreads);
  for (int address_error : {EADDRNOTAVAIL, EADDRINUSE, ECONNREFUSED, ENETUNREACH, EHOSTUNREACH}) {
    EXPECT_EQ(limit_of_errno(address_error), LimitKind::kNone) << std::strerror(address_error);
  }
}

// socket()'s ENOMEM and ENOBUFS are the kernel's memory for sockets: said as such, not as
// the thread limit (ulimit -u) a thread's ENOMEM is.
TEST(GlooLimits, ASocketsMemoryIsNotTheThreadLimit) {
  EXPECT_EQ(gloo::socket_limit_of_errno(ENOMEM), LimitKind::kSocketMemory);
  EXPECT_EQ(gloo::socket_limit_of_errno(ENOBUFS), LimitKind::kSocketMemory);
  EXPECT_EQ(gloo::socket_limit_of_errno(EMFILE), LimitKind::kDescriptors);
  EXPECT_EQ(gloo::socket_limit_of_errno(EAGAIN), LimitKind::kNone);
  EXPECT_EQ(gloo::socket_limit_of_errno(EAFNOSUPPORT), LimitKind::kNone);
  for (int err : {ENOMEM, ENOBUFS}) {
    const std::string said = std::string("[gloo/transport/tcp/pair.cc:94] socket: ") + std::strerror(err);
    ASSERT_EQ(limit_in_message(said), LimitKind::kSocketMemory) << said;
    const auto text = limit_failure("gloo cannot open the socket for rank 2", said);
    ASSERT_TRUE(text.has_value());
    EXPECT_NE(text->find("no memory for another socket"), std::string::npos) << *text;
    EXPECT_EQ(text->find("ulimit -u"), std::string::npos) << *text;
    EXPECT_EQ(text->find("thread"), std::string::npos) << *text;
  }
  // A thread's ENOMEM (its stack, under ulimit -v) stays the thread limit.
  EXPECT_EQ(limit_in_message("std::thread: Cannot allocate memory"), LimitKind::kThreads);
}

TEST(GlooLimits, AcceptOutOfDescriptorsNamesTheSoftLimitNotThePeer) {
  const std::string gloo_said = "[./gloo/transport/tcp/pair.cc:778] accept: Too many open files";
  ASSERT_EQ(limit_in_message(gloo_said), LimitKind::kDescriptors);
  rlimit limit{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &limit), 0);
  const auto text = limit_failure("rank 0/4 group 'world': the gloo rendezvous cannot connect to rank 1", gloo_said);
  ASSERT_TRUE(text.has_value());
  EXPECT_NE(text->find("ran out of file descriptors"), std::string::npos) << *text;
  EXPECT_NE(text->find("ulimit -n, is " + std::to_string(limit.rlim_cur)), std::string::npos) << *text;
  EXPECT_NE(text->find("raise `ulimit -n`"), std::string::npos) << *text;
  EXPECT_NE(text->find("rank 1"), std::string::npos) << *text;
  EXPECT_EQ(text->find("DISTCOMM_SOCKET_IFNAME"), std::string::npos) << *text;
}

TEST(GlooLimits, ResourceTemporarilyUnavailableIsTheThreadLimit) {
  const auto text = limit_failure("gloo cannot listen on address 127.0.0.1", "Resource temporarily unavailable");
  ASSERT_TRUE(text.has_value());
  EXPECT_NE(text->find("ulimit -u"), std::string::npos) << *text;
  EXPECT_NE(text->find("cannot start a thread"), std::string::npos) << *text;
}

TEST(GlooLimits, AnAddressFailureIsNoLimit) {
  EXPECT_FALSE(limit_failure("gloo cannot listen on address 10.1.2.3", "bind: Cannot assign requested address"));
  EXPECT_FALSE(limit_failure("gloo cannot listen on interface eth9", "Unable to find address for: eth9"));
}

// --- a real group at a real limit ---

int open_descriptors() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (const dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
    ::closedir(d);
    --n;  // the folder's own
  }
  return n;
}

// This process's address space, in bytes (VmSize).
long long address_space() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmSize:", 0) == 0) return std::stoll(line.substr(7)) * 1024;
  }
  return -1;
}

testing::GroupHarnessOptions limited_options() {
  testing::GroupHarnessOptions o;
  o.store = testing::StoreKind::kTcp;  // its connection is open before the limit; rank 0 serves it, unlimited
  o.op_timeout = std::chrono::milliseconds(10000);
  o.run.timeout = std::chrono::seconds(60);
  return o;
}

// Rank 1 of 4 with room for two more descriptors: its new group's third listening pair, or
// an accept, finds none. The error says so and names the soft limit; the others fail too.
TEST(GlooLimits, NewGroupOutOfDescriptorsSaysUlimitN) {
  testing::run_group(
      4, "gloo",
      [](ProcessGroup& pg) {
        if (pg.rank() != 1) {
          EXPECT_THROW(pg.new_group({0, 1, 2, 3}), Error) << "rank " << pg.rank();
          return;
        }
        rlimit limit{};
        ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &limit), 0);
        const rlimit low{static_cast<rlim_t>(open_descriptors() + 2), limit.rlim_max};
        ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
        std::string message;
        try {
          pg.new_group({0, 1, 2, 3});
          ADD_FAILURE() << "new_group succeeded with " << low.rlim_cur << " descriptors";
        } catch (const Error& e) {
          message = e.what();
        }
        ::setrlimit(RLIMIT_NOFILE, &limit);
        EXPECT_NE(message.find("ran out of file descriptors"), std::string::npos) << message;
        EXPECT_NE(message.find("ulimit -n, is " + std::to_string(low.rlim_cur)), std::string::npos) << message;
        EXPECT_EQ(message.find("DISTCOMM_SOCKET_IFNAME"), std::string::npos) << message;
      },
      limited_options());
}

// Rank 1 of 4 may start one more thread: its new group's rendezvous starts the first of
// its three connect threads and fails on the second. Before, the thread started was left
// joinable as the error unwound, and the process ended in std::terminate. The limit is
// RLIMIT_AS, which holds root too (RLIMIT_NPROC does not): room for one thread's stack,
// not two, with the default stack made large so that the group's own allocations do not
// matter.
TEST(GlooLimits, NewGroupAtTheThreadLimitFailsCleanly) {
  constexpr size_t kStack = size_t{64} << 20;
  testing::run_group(
      4, "gloo",
      [](ProcessGroup& pg) {
        if (pg.rank() != 1) {
          EXPECT_THROW(pg.new_group({0, 1, 2, 3}), Error) << "rank " << pg.rank();
          return;
        }
        pthread_attr_t attr;
        ASSERT_EQ(::pthread_getattr_default_np(&attr), 0);
        ASSERT_EQ(::pthread_attr_setstacksize(&attr, kStack), 0);
        ASSERT_EQ(::pthread_setattr_default_np(&attr), 0);
        ::pthread_attr_destroy(&attr);
        rlimit before{};
        ASSERT_EQ(::getrlimit(RLIMIT_AS, &before), 0);
        const long long now = address_space();
        ASSERT_GT(now, 0);
        const rlimit one_more{static_cast<rlim_t>(now) + kStack + kStack / 2, before.rlim_max};
        ASSERT_EQ(::setrlimit(RLIMIT_AS, &one_more), 0) << std::strerror(errno);
        std::string message;
        try {
          pg.new_group({0, 1, 2, 3});
          ADD_FAILURE() << "new_group succeeded with room for one more thread";
        } catch (const Error& e) {
          message = e.what();
        }
        ::setrlimit(RLIMIT_AS, &before);
        EXPECT_NE(message.find("cannot start a thread for"), std::string::npos) << message;
        EXPECT_NE(message.find("rendezvous's connects (thread 2 of 3)"), std::string::npos) << message;
        EXPECT_NE(message.find("ulimit -u"), std::string::npos) << message;
        EXPECT_NE(message.find("rank 1/4"), std::string::npos) << message;
      },
      limited_options());
}

}  // namespace
}  // namespace distcomm
