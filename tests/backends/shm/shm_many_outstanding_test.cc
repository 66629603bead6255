// Thousands of point-to-point transfers outstanding at once between two ranks (an outside
// user's probe: 8000 irecvs, then 8000 isends, then wait on all). Matching a message to its
// receive, a receive to a message that arrived first, and the engine's looks at deadlines
// and peers once walked every outstanding request: n transfers cost O(n^2) (76 s for 8000,
// and a Timeout with 16 ranks). Each must now cost O(1) amortized.
//
// Checked by counting, not by timing: the plugin counts the entries its matching and
// checking examine (distcomm_shm_p2p_scan_steps, found in the loaded plugin with dlsym),
// and a batch of M transfers may examine at most a small multiple of M. Also checked: every
// message lands in the receive MPI's non-overtaking rule gives it (same pair, same tag:
// posting order), with tags mixed, receives naming the peer and any source interleaved, and
// messages that arrive before their receive is posted.
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/backends/shm/shm_scan_steps.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace {

using std::chrono::milliseconds;
using testing::run_group;

constexpr int kM = 5000;
// The most entries a batch may examine per transfer: matching looks at two index fronts per
// message and one per source per receive (two ranks here); a scan over the outstanding ones
// examines thousands.
constexpr uint64_t kStepsPerTransfer = 16;

// Mixed tags, not in a round robin: neighbours rarely share one.
int tag_of(int k) { return (k * 31) % 53; }

using StepsFn = testing::ShmScanStepsFn;
using testing::shm_scan_steps_fn;

void expect_in_order(const std::vector<Tensor>& got, int peer, const std::string& phase) {
  int wrong = 0;
  for (int k = 0; k < kM; ++k) {
    const int32_t* v = got[static_cast<size_t>(k)].data_as<int32_t>();
    if (v[0] != peer || v[1] != k) {
      if (++wrong <= 3) ADD_FAILURE() << phase << ": receive " << k << " got {" << v[0] << ", " << v[1] << "}";
    }
  }
  EXPECT_EQ(wrong, 0) << phase;
}

TEST(ShmManyOutstanding, FiveThousandTransfersMatchInOrderWithLinearWork) {
  testing::GroupHarnessOptions options;
  options.op_timeout = milliseconds(120000);  // a backstop only: the batch takes well under a second
  options.run.timeout = std::chrono::seconds(280);
  run_group(2, "shm", [](ProcessGroup& pg) {
    const int peer = pg.rank() ^ 1;
    StepsFn steps = shm_scan_steps_fn();
    ASSERT_NE(steps, nullptr) << "distcomm_shm_p2p_scan_steps not found in the loaded shm plugin";

    // Receives first (every third from any source), then the sends, then wait on all.
    {
      pg.barrier()->wait();
      const uint64_t before = steps();
      std::vector<Tensor> got(kM);
      std::vector<WorkPtr> works;
      for (int k = 0; k < kM; ++k) {
        got[static_cast<size_t>(k)] = Tensor::zeros({2}, DType::kInt32);
        Tensor& t = got[static_cast<size_t>(k)];
        works.push_back(k % 3 == 0 ? pg.recv_any_source(t, P2POptions{tag_of(k)})
                                   : pg.recv(t, peer, P2POptions{tag_of(k)}));
      }
      for (int k = 0; k < kM; ++k) works.push_back(pg.send(Tensor::of<int32_t>({pg.rank(), k}), peer, P2POptions{tag_of(k)}));
      for (auto& w : works) w->wait();
      const uint64_t used = steps() - before;
      expect_in_order(got, peer, "receives posted first");
      EXPECT_GE(used, uint64_t{kM}) << "the counter counts nothing: the test would prove nothing";
      EXPECT_LE(used, kStepsPerTransfer * kM) << "matching examined " << used << " entries for " << kM << " messages";
    }

    // Sends first, all of them taken off the ring as unexpected messages, then the receives
    // posted tag by tag, the highest tag first: each receive must find its message without
    // passing the thousands of other tags' messages that arrived before it.
    {
      pg.barrier()->wait();
      const uint64_t before = steps();
      std::vector<WorkPtr> sends;
      for (int k = 0; k < kM; ++k) sends.push_back(pg.send(Tensor::of<int32_t>({pg.rank(), k}), peer, P2POptions{tag_of(k)}));
      for (auto& w : sends) w->wait();  // in the peer's ring or its private memory
      std::vector<Tensor> got(kM);
      std::vector<WorkPtr> recvs;
      for (int tag = 52; tag >= 0; --tag) {
        for (int k = 0; k < kM; ++k) {
          if (tag_of(k) != tag) continue;
          got[static_cast<size_t>(k)] = Tensor::zeros({2}, DType::kInt32);
          Tensor& t = got[static_cast<size_t>(k)];
          recvs.push_back(k % 3 == 0 ? pg.recv_any_source(t, P2POptions{tag}) : pg.recv(t, peer, P2POptions{tag}));
        }
      }
      for (auto& w : recvs) w->wait();
      const uint64_t used = steps() - before;
      expect_in_order(got, peer, "messages arrived first");
      EXPECT_GE(used, uint64_t{kM});
      EXPECT_LE(used, kStepsPerTransfer * kM) << "matching examined " << used << " entries for " << kM << " messages";
    }
    pg.barrier()->wait();
  }, options);
}

}  // namespace
}  // namespace distcomm
