// A rank 0 whose store server runs out of file descriptors (`ulimit -n` too low for its
// job) cannot accept() the other ranks' connections: they sit in the kernel's backlog, the
// ranks' handshakes get no answer and they give up. Rank 0's init, in the server's process,
// must say so within seconds, naming the ranks, rather than wait its whole timeout for ranks
// that cannot come; and such a client must not blame only the server's version.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "api/errors.h"
#include "api/group/init_wait.h"
#include "api/store/internal/store_handshake.h"
#include "api/store/tcp_store.h"
#include "tests/api/store/store_test_util.h"

namespace distcomm {
namespace {

using namespace std::chrono_literals;
using namespace testing;

// The highest descriptor this process has open.
int highest_open_fd() {
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return -1;
  int highest = -1;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    const int fd = std::atoi(e->d_name);
    if (fd != dirfd(dir) && fd > highest) highest = fd;
  }
  closedir(dir);
  return highest;
}

// Lowers this process's soft RLIMIT_NOFILE for its lifetime.
class SoftFdLimit {
 public:
  explicit SoftFdLimit(rlim_t soft) {
    getrlimit(RLIMIT_NOFILE, &saved_);
    rlimit lowered = saved_;
    lowered.rlim_cur = soft;
    ok_ = setrlimit(RLIMIT_NOFILE, &lowered) == 0;
  }
  ~SoftFdLimit() { setrlimit(RLIMIT_NOFILE, &saved_); }
  bool ok() const { return ok_; }

 private:
  rlimit saved_{};
  bool ok_ = false;
};

bool connect_to(int fd, int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0;
}

TEST(OutOfFiles, RankZerosInitSaysItsServerCannotAcceptTheRanksItWaitsFor) {
  const JobIdentity id = new_job_identity();
  TCPStore rank0(server_of(id));
  const std::string at = "127.0.0.1:" + std::to_string(rank0.port());
  // Ranks 1 and 2's sockets, made while there is room; connected once there is none left
  // for the server to accept them with (a connect takes no new descriptor).
  const int rank1 = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int rank2 = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(rank1, 0);
  ASSERT_GE(rank2, 0);
  {
    const rlim_t limit = static_cast<rlim_t>(highest_open_fd() + 1);
    SoftFdLimit lowered(limit);
    ASSERT_TRUE(lowered.ok());
    ASSERT_TRUE(connect_to(rank1, rank0.port()));
    ASSERT_TRUE(connect_to(rank2, rank0.port()));

    InitWait w = InitWait::starting_now(15s, 30s, "rank 0/3 group 'world'");
    w.failure_store = &rank0;
    w.failure_key = "pg/world/creation_failed";
    w.store_host = "rank 0";
    const auto [error, took] =
        error_of<Timeout>([&] { wait_for_arrivals(rank0, "pg/world/", 0, 3, w, at); });
    RecordProperty("init_error", error);
    // Within the grace (3 s) and a few polls, not the 15 s timeout.
    EXPECT_LT(took, 9s) << error;
    EXPECT_NE(error.find("rank 0/3 group 'world': init gave up"), std::string::npos) << error;
    EXPECT_NE(error.find("ranks [1, 2] to arrive at the store"), std::string::npos) << error;
    EXPECT_NE(error.find("TCPStore server ran out of file descriptors"), std::string::npos) << error;
    EXPECT_NE(error.find("ulimit -n, is " + std::to_string(limit)), std::string::npos) << error;
    EXPECT_NE(error.find("Too many open files"), std::string::npos) << error;
    EXPECT_EQ(error.find("timed out after"), std::string::npos) << error;

    // Rank 1's handshake gets no answer: its error says the server may be out of descriptors.
    bool closed_early = false;
    const auto [refused, handshake_took] = error_of<StoreError>([&] {
      internal::client_handshake(rank1, at, id, internal::Clock::now() + 1s, &closed_early, 3);
    });
    RecordProperty("handshake_error", refused);
    EXPECT_NE(refused.find("did not answer the handshake"), std::string::npos) << refused;
    EXPECT_NE(refused.find("may be unable to take more connections (out of file descriptors"), std::string::npos)
        << refused;
  }
  close(rank1);
  close(rank2);
}

}  // namespace
}  // namespace distcomm
