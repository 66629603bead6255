// The two sides of a point-to-point transfer disagree: rank 0 sends rank 1 a message of
// another size or dtype than rank 1's recv holds; ranks 2 and up look on. The recv must fail with
// InvalidArgument naming both sides (the counts or the dtypes, and the sender, rank 0)
// within the group's timeout + 2 s and leave its tensor untouched; the send must fail the
// same way, unless the backend's send cannot tell (fault_differences.cc, "send completes"),
// when it must complete within the same bound rather than wait out the timeout.
#include <string>
#include <vector>

#include "api/errors.h"
#include "tests/backends/fault/fault_checks.h"
#include "tests/backends/fault/fault_suite.h"

namespace distcomm {
namespace fault {
namespace {

using testing::expect_failure_within;
using testing::mark_done;
using testing::seconds_since;
using testing::wait_for_done;

// What rank 1's recv holds against what rank 0 sends, and the texts both ends must show.
struct Sides {
  Tensor sent, received;
  std::vector<std::string> names;  // in the recv's message (and the send's, where it fails)
};

void expect_p2p_mismatch(Runner& runner, const Sides& sides, bool send_completes) {
  runner.run([&](Rank& r) {
    ProcessGroupPtr pg = r.join();
    pg->barrier()->wait();
    if (r.rank() >= 2) {
      wait_for_done(r.board(), {0, 1});
      return;
    }
    if (r.rank() == 0) {
      Tensor t = sides.sent.clone();
      t.fill(7);
      if (send_completes) {
        const auto start = Clock::now();
        pg->send(t, 1)->wait();
        EXPECT_LT(seconds_since(start), kWithin) << "the send";
      } else {
        const std::string msg =
            expect_failure_within<InvalidArgument>([&] { pg->send(t, 1)->wait(); }, 0, kWithin, "the send");
        for (const std::string& n : sides.names) expect_has(msg, n, "the send's error");
      }
    } else {
      Tensor t = sides.received.clone();
      t.fill(-1);
      const std::string msg =
          expect_failure_within<InvalidArgument>([&] { pg->recv(t, 0)->wait(); }, 0, kWithin, "the recv");
      for (const std::string& n : sides.names) expect_has(msg, n, "the recv's error");
      expect_has(msg, "rank 0", "the recv's error (its sender)");
      // Where the send completed, the recv's error says that the sender was not told.
      if (send_completes) expect_has(msg, "the sender cannot tell", "the recv's error");
      for (int64_t i = 0; i < t.numel(); ++i) EXPECT_EQ(t.item(i), -1) << "element " << i << ": a byte landed";
    }
    mark_done(r.board(), r.rank());
  });
}

TEST_P(FaultSuite, RecvSmallerThanTheMessage) {
  expect_p2p_mismatch(runner(), {floats(4), floats(2), {"2 float32 (8 bytes)", "4 float32 (16 bytes)"}},
                      !differs("send completes").empty());
}

TEST_P(FaultSuite, RecvLargerThanTheMessage) {
  expect_p2p_mismatch(runner(), {floats(2), floats(4), {"2 float32 (8 bytes)", "4 float32 (16 bytes)"}},
                      !differs("send completes").empty());
}

// The same 16 bytes: only the dtype tells the sides apart.
TEST_P(FaultSuite, RecvDtypeDiffers) {
  expect_p2p_mismatch(runner(), {floats(4), Tensor::zeros({4}, DType::kInt32), {"int32", "float32"}},
                      !differs("send completes").empty());
}

}  // namespace
}  // namespace fault
}  // namespace distcomm
