// Under a file size limit (ulimit -f, RLIMIT_FSIZE) smaller than this rank's segment, shm
// refuses the segment with a BackendUnavailable naming the bytes, the limit and `ulimit -f`:
// growing the memfd past the limit made the kernel send SIGXFSZ, which killed every rank
// with no message. Each case runs in a forked child, whose limit is lowered there alone.
// Compiled with backends/shm/shm_segment.cc itself: the plugin exports no Segment.
#include "backends/shm/shm_segment.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "api/errors.h"
#include "tests/testing/child_output.h"

namespace distcomm {
namespace shm {
namespace {

// Segment::create(bytes) in a child under RLIMIT_FSIZE = limit: what it threw, "(created)",
// or how the child ended (testing::child_output).
std::string create_under_limit(size_t bytes, rlim_t limit) {
  return testing::child_output([&]() -> std::string {
    rlimit rl{};
    ::getrlimit(RLIMIT_FSIZE, &rl);
    rl.rlim_cur = limit;
    if (::setrlimit(RLIMIT_FSIZE, &rl) != 0) return "(setrlimit failed)";
    try {
      Segment s = Segment::create("file-size-limit-test", bytes, 0, 2);
      return "(created)";
    } catch (const BackendUnavailable& e) {
      return e.what();
    }
  });
}

TEST(ShmFileSizeLimit, SegmentOverTheLimitIsRefusedWithTheLimitNotKilled) {
  const size_t bytes = size_t{5} << 20;
  const std::string text = create_under_limit(bytes, rlim_t{1} << 20);  // ulimit -f 1024
  EXPECT_NE(text.find("shm: this rank's segment needs " + std::to_string(bytes) + " bytes"), std::string::npos)
      << text;
  EXPECT_NE(text.find("file size limit of 1048576 bytes"), std::string::npos) << text;
  EXPECT_NE(text.find("ulimit -f"), std::string::npos) << text;
  EXPECT_EQ(text.find("signal"), std::string::npos) << text;
}

TEST(ShmFileSizeLimit, SegmentWithinTheLimitIsCreated) {
  EXPECT_EQ(create_under_limit(size_t{1} << 20, rlim_t{4} << 20), "(created)");
  EXPECT_EQ(file_size_limit_failure(size_t{1} << 20).find("ulimit"), std::string::npos);
}

}  // namespace
}  // namespace shm
}  // namespace distcomm
