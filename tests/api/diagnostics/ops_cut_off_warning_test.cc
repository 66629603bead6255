// A group destroyed with ops of the program not finished cuts them off; each rank says so in
// one line, at any debug level, naming them (found by a review: 50 unwaited all_reduces ended
// with a PeerFailure nobody saw, and nothing was printed, even at DISTCOMM_DEBUG=INFO). A
// group whose ops all ended says nothing.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "api/process_group.h"
#include "tests/testing/multiprocess.h"
#include "tests/testing/captured_stderr.h"
#include "tests/testing/test_files.h"

namespace distcomm {
namespace {

using testing::read_file;
using testing::temp_path;

std::string stderr_of(const std::string& backend, int rank) {
  return temp_path("cut_off_" + backend + std::to_string(rank) + ".err");
}


class OpsCutOff : public ::testing::TestWithParam<std::string> {};

TEST_P(OpsCutOff, ADestroyedGroupNamesTheOpsItCutOff) {
  const std::string backend = GetParam();
  testing::run_group(2, backend, [&](ProcessGroup& pg) {
    ASSERT_TRUE(testing::redirect_stderr(stderr_of(backend, pg.rank())));
    Tensor done = Tensor::zeros({4});
    pg.all_reduce(done)->wait();  // ended: not named
    // Rank 1 posts a recv that no send meets, and rank 0 one that no send meets either:
    // neither can end before the group goes.
    Tensor never = Tensor::zeros({4});
    WorkPtr open = pg.recv(never, 1 - pg.rank(), P2POptions{.tag = 7});
    pg.barrier()->wait();
  });
  for (int r = 0; r < 2; ++r) {
    const std::string err = read_file(stderr_of(backend, r));
    EXPECT_NE(err.find("distcomm: group 'world' destroyed with 1 op not finished (recv p2p#0): they end with a "
                       "PeerFailure and their results are lost; wait() on an op before the group goes to keep it"),
              std::string::npos)
        << "rank " << r << ":\n" << err;
    EXPECT_EQ(err.find("all_reduce #"), std::string::npos) << "an op that ended was named:\n" << err;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, OpsCutOff, ::testing::Values("gloo", "shm"));

}  // namespace
}  // namespace distcomm
