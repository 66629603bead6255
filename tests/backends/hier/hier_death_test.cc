// A rank killed in the middle of a hierarchical all_reduce on 2 hosts x 2 ranks: the path
// of reduce_scatter / all_reduce across / all_gather in pieces, which the fault suite (3
// ranks, so hosts of 2 + 1) does not take. Every survivor's op fails naming the dead rank,
// or, its part done once the dead rank's data was in, ends with the right values; either
// way its next op fails at once naming it, and nothing waits out the group's timeout.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include <gtest/gtest.h>

#include "api/errors.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kVictim = 3;  // host b, local rank 1

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

bool names_the_victim(const std::string& message) {
  const bool rank = message.find("rank " + std::to_string(kVictim)) != std::string::npos;
  const bool gone = message.find("died") != std::string::npos || message.find("closed") != std::string::npos ||
                    message.find("exited") != std::string::npos;
  return rank && gone;
}

TEST(HierDeath, ARankKilledMidOpOnTwoByTwo) {
  testing::GroupHarnessOptions options;
  options.host_ids = {"a", "a", "b", "b"};
  options.op_timeout = std::chrono::seconds(20);
  options.run.may_be_killed = {kVictim};
  testing::run_group(4, "hier", [](ProcessGroup& pg) {
    ASSERT_EQ(pg.backend_for(DeviceType::kCPU).name(), "hier");
    Tensor t = Tensor::zeros({16 << 20});  // 64 MiB: 16 pieces of the pipeline
    t.fill(1);
    pg.barrier()->wait();
    const auto issued = Clock::now();
    WorkPtr work = pg.all_reduce(t);
    if (pg.rank() == kVictim) {
      // Dies once a result has reached its tensor: the op is under way on every rank.
      const float* values = t.data_as<float>();
      const int64_t stride = t.numel() / 64;
      while (since(issued) < 10) {
        for (int64_t i = 0; i < t.numel(); i += stride) {
          if (__atomic_load_n(reinterpret_cast<const uint32_t*>(values + i), __ATOMIC_RELAXED) != 0x3f800000u) {
            ::raise(SIGKILL);
          }
        }
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
      ADD_FAILURE() << "the all_reduce never got under way";
      return;
    }
    bool finished = false;
    try {
      work->wait();
      finished = true;
    } catch (const PeerFailure& e) {
      EXPECT_TRUE(names_the_victim(e.what())) << "rank " << pg.rank() << ": " << e.what();
    }
    EXPECT_LT(since(issued), 10) << "rank " << pg.rank() << ": the op took this long to end";
    if (finished) {
      const float* values = t.data_as<float>();
      const float* wrong = std::find_if(values, values + t.numel(), [](float v) { return v != 4; });
      EXPECT_EQ(wrong, values + t.numel()) << "rank " << pg.rank() << " ended well with a wrong element";
    }
    const auto next = Clock::now();
    try {
      pg.barrier()->wait();
      ADD_FAILURE() << "rank " << pg.rank() << ": the next op succeeded";
    } catch (const PeerFailure& e) {
      EXPECT_TRUE(names_the_victim(e.what())) << "rank " << pg.rank() << ": " << e.what();
    }
    EXPECT_LT(since(next), 3) << "rank " << pg.rank() << ": the next op took this long to fail";
  }, options);
}

}  // namespace
}  // namespace distcomm
