// A whole host frozen (SIGSTOP of every rank on it) in the middle of a hierarchical op, and
// resumed once the op's timeout and the core's grace after it have both passed: the
// resumed ranks must end with the group's failure (the other host's ranks timed out and
// aborted the group), as a flat gloo group's do, not with the core's safety-net Timeout
// ("backend 'hier' did not end the op ... the core ended it"), which reads as a bug in
// hier. An outside user's 4 hosts x 4 ranks, one host stopped for 66 s, read the latter.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "api/errors.h"
#include "api/work.h"
#include "tests/testing/multiprocess.h"
#include "tests/testing/stop_self.h"

namespace distcomm {
namespace {

constexpr auto kTimeout = std::chrono::seconds(3);
constexpr int kFirstFrozen = 2;  // host b: ranks 2 and 3

TEST(HierFrozenHost, ResumedRanksEndWithTheGroupsFailureNotTheCoresGrace) {
  testing::GroupHarnessOptions options;
  options.host_ids = {"a", "a", "b", "b"};
  options.op_timeout = kTimeout;
  // The frozen ranks resume past the op's timeout and the core's grace after it.
  const int frozen_s = static_cast<int>((kTimeout + core_timeout_grace(kTimeout)).count() / 1000) + 4;
  testing::run_group(
      4, "hier",
      [&](ProcessGroup& pg) {
        ASSERT_EQ(pg.backend_for(DeviceType::kCPU).name(), "hier");
        // 64 MiB: the op runs by hosts, and is under way (not finished) when host b stops.
        Tensor t = Tensor::of<float>(std::vector<float>(size_t{16} << 20, float(pg.rank() + 1)));
        pg.barrier()->wait();
        WorkPtr work = pg.all_reduce(t);
        pid_t resumer = -1;
        if (pg.rank() >= kFirstFrozen) resumer = testing::stop_self_after(std::chrono::milliseconds(20), std::chrono::seconds(frozen_s));
        std::string message;
        try {
          work->wait();
        } catch (const Error& e) {
          message = e.what();
        }
        if (resumer > 0) ::waitpid(resumer, nullptr, 0);
        std::fprintf(stderr, "rank %d ended with: %s\n", pg.rank(), message.c_str());
        ASSERT_FALSE(message.empty()) << "rank " << pg.rank() << ": the op succeeded with host b frozen";
        if (pg.rank() < kFirstFrozen) return;  // host a's ranks timed out: what they say is the cause
        EXPECT_EQ(message.find("the core ended it"), std::string::npos)
            << "rank " << pg.rank() << " (resumed) ended with the core's safety net: " << message;
        // The group's failure, as a flat group's resumed rank adopts it.
        EXPECT_NE(message.find("timed out"), std::string::npos) << "rank " << pg.rank() << ": " << message;
      },
      options);
}

}  // namespace
}  // namespace distcomm
