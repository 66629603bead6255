// A rank killed in the middle of a hierarchical op on 2 hosts x 2 ranks: all_reduce
// (reduce_scatter / all_reduce across / all_gather in pieces), broadcast (broadcast within
// the root's host, shares across, all_gather within) and all_gather (across, then within),
// paths the fault suite's 3 ranks (hosts of 2 + 1) do not take. Every survivor's op fails
// naming the dead rank, or, its part done once the dead rank's data was in, ends with the
// right values; either way its next op fails at once naming it, and nothing waits out the
// group's timeout.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <thread>

#include <gtest/gtest.h>

#include "api/errors.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kVictim = 3;  // host b, local rank 1
constexpr int64_t kCount = 16 << 20;  // 64 MiB of float32: 16 pieces of the pipeline
constexpr int64_t kGathered = kCount / 4;  // per rank: all_gather's output is kCount, in 16 pieces

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

bool names_the_victim(const std::string& message) {
  const bool rank = message.find("rank " + std::to_string(kVictim)) != std::string::npos;
  const bool gone = message.find("died") != std::string::npos || message.find("closed") != std::string::npos ||
                    message.find("exited") != std::string::npos;
  return rank && gone;
}

// One op under test: what it writes (its result, filled before the op with values no
// result has) and the value each element must end with on ranks whose op succeeded.
struct DeathCase {
  std::string name;
  int64_t result_count;
  int64_t input_count;                               // each rank's: rank + 1 everywhere
  float before;                                      // the victim's result's elements before the op
  std::function<float(int64_t i)> expected;           // element i of the result
  std::function<WorkPtr(ProcessGroup&, Tensor& result, Tensor& input)> issue;
};

void PrintTo(const DeathCase& c, std::ostream* out) { *out << c.name; }

class HierDeath : public ::testing::TestWithParam<DeathCase> {};

TEST_P(HierDeath, ARankKilledMidOpOnTwoByTwo) {
  const DeathCase& c = GetParam();
  testing::GroupHarnessOptions options;
  options.host_ids = {"a", "a", "b", "b"};
  options.op_timeout = std::chrono::seconds(20);
  options.run.may_be_killed = {kVictim};
  testing::run_group(4, "hier", [&](ProcessGroup& pg) {
    ASSERT_EQ(pg.backend_for(DeviceType::kCPU).name(), "hier");
    Tensor result = Tensor::zeros({c.result_count});
    result.fill(c.before);
    Tensor input = Tensor::zeros({c.input_count});
    input.fill(pg.rank() + 1);
    pg.barrier()->wait();
    const auto issued = Clock::now();
    WorkPtr work = c.issue(pg, result, input);
    if (pg.rank() == kVictim) {
      // Dies once a result has reached its tensor: the op is under way on every rank.
      const float* values = result.data_as<float>();
      uint32_t before;
      std::memcpy(&before, &c.before, sizeof before);
      const int64_t stride = result.numel() / 256;
      while (since(issued) < 10) {
        for (int64_t i = 0; i < result.numel(); i += stride) {
          if (__atomic_load_n(reinterpret_cast<const uint32_t*>(values + i), __ATOMIC_RELAXED) != before) {
            ::raise(SIGKILL);
          }
        }
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
      ADD_FAILURE() << "the " << c.name << " never got under way";
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
      const float* values = result.data_as<float>();
      for (int64_t i = 0; i < result.numel(); ++i) {
        if (values[i] != c.expected(i)) {
          ADD_FAILURE() << "rank " << pg.rank() << " ended well with element " << i << " = " << values[i]
                        << ", not " << c.expected(i);
          break;
        }
      }
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

INSTANTIATE_TEST_SUITE_P(
    Ops, HierDeath,
    ::testing::Values(
        // In place: the result starts as each rank's input (the victim's 4), sums to 1 + 2 + 3 + 4.
        DeathCase{"all_reduce", kCount, 0, kVictim + 1, [](int64_t) { return 10.0f; },
                  [](ProcessGroup& pg, Tensor& result, Tensor&) {
                    result.fill(pg.rank() + 1);
                    return pg.all_reduce(result);
                  }},
        DeathCase{"broadcast", kCount, kCount, 0, [](int64_t) { return 1.0f; },
                  [](ProcessGroup& pg, Tensor& result, Tensor& input) {
                    if (pg.rank() == 0) result.copy_from(input);
                    return pg.broadcast(result);  // from rank 0, host a
                  }},
        DeathCase{"all_gather", 4 * kGathered, kGathered, 0, [](int64_t i) { return static_cast<float>(i / kGathered + 1); },
                  [](ProcessGroup& pg, Tensor& result, Tensor& input) {
                    return pg.all_gather_into_tensor(result, input);
                  }}),
    [](const ::testing::TestParamInfo<DeathCase>& info) { return info.param.name; });

}  // namespace
}  // namespace distcomm
