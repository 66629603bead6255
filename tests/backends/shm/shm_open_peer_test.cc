// Segment::open_peer's refusals say why by errno: a process out of descriptors (EMFILE,
// under ulimit -n) is told to raise the limit and how many the group holds, not that both
// processes must run as one user (the hint for EACCES / EPERM it was given before).
// Compiled with backends/shm/shm_segment.cc itself: the plugin exports no Segment.
#include "backends/shm/shm_segment.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <string>
#include <vector>

#include "api/errors.h"

namespace distcomm {
namespace shm {
namespace {

int proc_self_pid() {
  char buf[32] = {};
  const ssize_t n = ::readlink("/proc/self", buf, sizeof(buf) - 1);
  return n > 0 ? std::stoi(std::string(buf, static_cast<size_t>(n))) : static_cast<int>(::getpid());
}

std::string open_refusal(int pid, int fd, size_t bytes, int group_size) {
  try {
    Segment::open_peer(pid, fd, bytes, 0, group_size);
  } catch (const BackendUnavailable& e) {
    return e.what();
  }
  return "(opened)";
}

TEST(ShmOpenPeer, OutOfDescriptorsSaysRaiseTheLimitNotSameUser) {
  const size_t bytes = size_t{1} << 16;
  Segment own = Segment::create("open-peer-test", bytes, 0);
  rlimit saved {};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit low = saved;
  low.rlim_cur = 200;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  std::vector<int> filler;
  for (int fd; (fd = ::dup(0)) >= 0;) filler.push_back(fd);
  ASSERT_EQ(errno, EMFILE);
  const std::string message = open_refusal(proc_self_pid(), own.fd(), bytes, 4);
  for (int fd : filler) ::close(fd);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
  EXPECT_NE(message.find("shm: cannot open the peer's segment /proc/"), std::string::npos) << message;
  EXPECT_NE(message.find(std::string(": ") + std::strerror(EMFILE) +
                         " (this process has no file descriptor left under its limit of 200 (RLIMIT_NOFILE, ulimit -n): "
                         "raise it, e.g. ulimit -n"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("shm group of 4 ranks holds 7 descriptors for it"), std::string::npos) << message;
  EXPECT_EQ(message.find("same user"), std::string::npos) << message;
  // With the limit back, the same segment opens.
  EXPECT_EQ(open_refusal(proc_self_pid(), own.fd(), bytes, 4), "(opened)");
}

// Creating this rank's own segment under ulimit -n: the memfd_create refusal says the same
// (it said only "shm: memfd_create: Too many open files").
TEST(ShmOpenPeer, OutOfDescriptorsForItsOwnSegmentNamesTheLimit) {
  rlimit saved {};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit low = saved;
  low.rlim_cur = 200;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  std::vector<int> filler;
  for (int fd; (fd = ::dup(0)) >= 0;) filler.push_back(fd);
  ASSERT_EQ(errno, EMFILE);
  std::string message = "(created)";
  try {
    Segment::create("own-segment-test", size_t{1} << 16, 0);
  } catch (const BackendUnavailable& e) {
    message = e.what();
  }
  std::string sized = "(created)";
  try {
    Segment::create("own-segment-test", size_t{1} << 16, 0, 4);
  } catch (const BackendUnavailable& e) {
    sized = e.what();
  }
  for (int fd : filler) ::close(fd);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
  EXPECT_NE(message.find("shm: memfd_create"), std::string::npos) << message;
  EXPECT_NE(message.find("this process has no file descriptor left under its limit of 200 (RLIMIT_NOFILE, ulimit -n): "
                         "raise it, e.g. ulimit -n"),
            std::string::npos)
      << message;
  EXPECT_NE(sized.find("shm group of 4 ranks holds 7 descriptors for it"), std::string::npos) << sized;
}

TEST(ShmOpenPeer, EachErrnoHasItsOwnHint) {
  // Ranks of different users never share segments: gloo is the way.
  EXPECT_NE(open_failure_hint(EACCES, 2).find("use DISTCOMM_BACKEND=gloo (or --backend=gloo) for ranks that run as "
                                              "different users"),
            std::string::npos);
  EXPECT_NE(open_failure_hint(EACCES, 2).find("same user in one PID namespace"), std::string::npos);
  EXPECT_NE(open_failure_hint(EPERM, 2).find("non-dumpable"), std::string::npos);
  EXPECT_NE(open_failure_hint(ENOENT, 2).find("the peer's process has ended"), std::string::npos);
  EXPECT_NE(open_failure_hint(ENFILE, 2).find("fs.file-max"), std::string::npos);
  EXPECT_EQ(open_failure_hint(ENFILE, 2).find("same user"), std::string::npos);
  // Without the group's size: the limit, without a count.
  const std::string unsized = open_failure_hint(EMFILE, 0);
  EXPECT_NE(unsized.find("ulimit -n"), std::string::npos) << unsized;
  EXPECT_EQ(unsized.find("descriptors for it"), std::string::npos) << unsized;
  // A descriptor that is not open: the peer closed it.
  EXPECT_NE(open_refusal(proc_self_pid(), INT_MAX, 1, 2).find("the peer's process has ended"), std::string::npos);
}

}  // namespace
}  // namespace shm
}  // namespace distcomm
