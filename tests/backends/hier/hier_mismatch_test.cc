// Ranks that disagree on an op at sizes the hierarchy runs (api/hierarchical_backend.h), on
// 2 hosts x 2 ranks: the fault suite's mismatch rules (tests/backends/fault/fault_mismatch.cc),
// whose own cases are small enough to run flat. Each rank's levels then run different
// schedules, which must not match up; the ranks must fail with the flat check's Desync,
// whose table names what rank 1 runs there, within the group's timeout + 2 s, and no rank's
// op may succeed.
#include <chrono>
#include <functional>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "api/errors.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kCulprit = 1;  // host a, local rank 1
constexpr auto kTimeout = std::chrono::seconds(5);
constexpr int64_t kCount = 1 << 20;  // 4 MiB of float32: past every op's flat threshold

// Every rank: a barrier (#0), then op(pg, this rank is the culprit) (#1, issued and waited
// for), which must fail with a Desync naming rank 1's op. Ranks in `may_finish` may instead
// return with their tensor unchanged: gloo's "a bystander that agrees with the root
// finishes" (tests/backends/fault/fault_differences.cc), a non-root of a reduce whose part
// met only ranks that agree with it.
void expect_desync(const std::function<void(ProcessGroup&, Tensor&, bool culprit)>& op,
                   const std::string& culprit_op, const std::set<int>& may_finish = {}) {
  testing::GroupHarnessOptions options;
  options.host_ids = {"a", "a", "b", "b"};
  options.op_timeout = kTimeout;
  testing::run_group(4, "hier", [&](ProcessGroup& pg) {
    ASSERT_EQ(pg.backend_for(DeviceType::kCPU).name(), "hier");
    Tensor t = Tensor::zeros({kCount});
    t.fill(pg.rank() + 1);
    pg.barrier()->wait();
    const auto issued = Clock::now();
    try {
      op(pg, t, pg.rank() == kCulprit);
      if (may_finish.count(pg.rank()) == 0) {
        ADD_FAILURE() << "rank " << pg.rank() << ": the op rank 1 disagrees on succeeded";
      } else {
        for (int64_t i = 0; i < t.numel(); i += 4096) {
          ASSERT_EQ(t.item(i), pg.rank() + 1) << "rank " << pg.rank() << " element " << i;
        }
      }
    } catch (const Desync& e) {
      // The table's line for rank 1 ("  rank 1: <op>, ...") names its op.
      const std::string msg = e.what();
      const size_t line = msg.find("rank 1:");
      const std::string rest = line == std::string::npos ? "" : msg.substr(line, msg.find('\n', line) - line);
      EXPECT_NE(rest.find(culprit_op), std::string::npos) << "rank " << pg.rank() << ": " << msg;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "rank " << pg.rank() << ": not a Desync: " << e.what();
    }
    const double took = std::chrono::duration<double>(Clock::now() - issued).count();
    EXPECT_LT(took, std::chrono::duration<double>(kTimeout).count() + 2) << "rank " << pg.rank();
  }, options);
}

TEST(HierMismatch, BroadcastAgainstAllReduce) {
  expect_desync(
      [](ProcessGroup& pg, Tensor& t, bool culprit) { (culprit ? pg.broadcast(t) : pg.all_reduce(t))->wait(); },
      "broadcast #1 float32[1048576] root 0");
}

TEST(HierMismatch, AllGatherCountDiffers) {
  expect_desync(
      [](ProcessGroup& pg, Tensor&, bool culprit) {
        // Outputs of 8 and 4 MiB: both past all_gather's threshold.
        const int64_t count = culprit ? kCount / 2 : kCount / 4;
        Tensor out = Tensor::zeros({4 * count});
        pg.all_gather_into_tensor(out, Tensor::zeros({count}))->wait();
      },
      "all_gather #1 float32[524288]");
}

TEST(HierMismatch, ReduceRootDiffers) {
  expect_desync(
      [](ProcessGroup& pg, Tensor& t, bool culprit) {
        ReduceOptions o;
        o.root = culprit ? 1 : 2;
        pg.reduce(t, o)->wait();
      },
      "reduce #1 float32[1048576] root 1 sum", /*may_finish=*/{0, 3});
}

}  // namespace
}  // namespace distcomm
