// An shm send completes once its message is in shared memory, before any receive took it:
// a send whose destination never posts the matching recv was lost without a word (rc 0,
// nothing said), where gloo names it when the group goes ("destroyed with 1 op not
// finished (send p2p#0)"). The group's destruction names it in one line: the op, the
// destination, the tag, the bytes. A send that was received is not named.
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

std::string stderr_file(const std::string& name, int rank) {
  return temp_path("unreceived_" + name + std::to_string(rank) + ".err");
}


TEST(ShmUnreceivedSend, ADestroyedGroupNamesASendNoReceiveTook) {
  testing::run_group(3, "shm", [&](ProcessGroup& pg) {
    ASSERT_TRUE(testing::redirect_stderr(stderr_file("lost", pg.rank())));
    Tensor t = Tensor::zeros({8});
    if (pg.rank() == 0) {
      WorkPtr received = pg.send(t, 2, P2POptions{.tag = 3});  // rank 2 takes this one
      WorkPtr lost = pg.send(t, 1, P2POptions{.tag = 5});       // rank 1 never posts a recv
    } else if (pg.rank() == 2) {
      pg.recv(t, 0, P2POptions{.tag = 3})->wait();
    }
    pg.barrier()->wait();
  });
  const std::string err = read_file(stderr_file("lost", 0));
  EXPECT_NE(err.find("distcomm: group 'world' destroyed with 1 send that no receive took (send p2p#1 (float32[8] on "
                     "cpu) to rank 1, tag 5, 32 bytes)"),
            std::string::npos)
      << "rank 0:\n" << err;
  EXPECT_EQ(err.find("to rank 2"), std::string::npos) << "a send that was received was named:\n" << err;
  for (int r = 1; r < 3; ++r) {
    EXPECT_EQ(read_file(stderr_file("lost", r)).find("no receive took"), std::string::npos) << "rank " << r;
  }
}

TEST(ShmUnreceivedSend, SendsThatWereReceivedAreNotNamed) {
  testing::run_group(2, "shm", [&](ProcessGroup& pg) {
    ASSERT_TRUE(testing::redirect_stderr(stderr_file("taken", pg.rank())));
    Tensor t = Tensor::zeros({1024});
    for (int i = 0; i < 3; ++i) {
      if (pg.rank() == 0) {
        pg.send(t, 1)->wait();
      } else {
        pg.recv(t, 0)->wait();
      }
    }
    // The last one received only after the sender's group is gone: it still arrives.
    if (pg.rank() == 0) pg.send(t, 1)->wait();
    pg.barrier()->wait();
    if (pg.rank() == 1) pg.recv(t, 0)->wait();
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(read_file(stderr_file("taken", r)).find("no receive took"), std::string::npos) << "rank " << r;
  }
}

}  // namespace
}  // namespace distcomm
