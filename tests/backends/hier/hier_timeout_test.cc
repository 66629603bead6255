// An op whose timeout runs out inside one of its levels (the time across hosts spent, the
// level within a host given what was left) is a Timeout of the op, in the op's terms: its
// own timeout, not the level's remainder ("1 ms"), and no healthy rank called failed. An
// outside user's 2 hosts x 2 ranks over a 2 Mbit/s link read "rank 2 failed, seen by the
// group's level 'world/hier_host1' ... did not finish within its timeout of 1 ms".
#include <chrono>
#include <string>

#include <gtest/gtest.h>

#include "api/errors.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace {

TEST(HierTimeout, AnOpThatRunsOutOfTimeInALevelSaysItsOwnTimeoutAndBlamesNobody) {
  testing::GroupHarnessOptions options;
  options.host_ids = {"a", "a", "b", "b"};
  options.op_timeout = std::chrono::seconds(20);
  testing::run_group(
      4, "hier",
      [&](ProcessGroup& pg) {
        ASSERT_EQ(pg.backend_for(DeviceType::kCPU).name(), "hier");
        // 64 MiB in 10 ms: the one-element check passes (or times out itself, said in the flat
        // group's words, which the checks below accept too), the levels cannot finish.
        Tensor t = Tensor::of<float>(std::vector<float>(size_t{16} << 20, float(pg.rank() + 1)));
        AllReduceOptions o;
        o.timeout = std::chrono::milliseconds(10);
        std::string message;
        try {
          pg.all_reduce(t, o)->wait();
        } catch (const Error& e) {
          message = e.what();
        }
        ASSERT_FALSE(message.empty()) << "rank " << pg.rank() << ": 64 MiB finished within 10 ms";
        EXPECT_EQ(message.find("failed, seen by the group's level"), std::string::npos)
            << "rank " << pg.rank() << " blames a healthy rank: " << message;
        EXPECT_EQ(message.find("failed first"), std::string::npos)
            << "rank " << pg.rank() << " blames a healthy rank: " << message;
        // The rank whose level ran out says so in the op's terms; the others quote it, or
        // (a flat timeout of the check) say the same in the flat group's words.
        EXPECT_NE(message.find("did not finish within its timeout of 10 ms"), std::string::npos)
            << "rank " << pg.rank() << ": " << message;
      },
      options);
}

}  // namespace
}  // namespace distcomm
