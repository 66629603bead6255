// Not a failure but a silent wrong result, checked on every backend as the other cases are:
// issue order covers the list forms (api/ops/op_overlaps.h, docs/backends.md, "Issue order
// and the list forms"). A list op issued after an op that writes its inputs packs what
// that op wrote; an op issued after a list op on the list's outputs sees the write-back; a
// batch that receives into memory it also sends is refused before anything is sent. Every
// op is issued before any is waited for.
#include <string>
#include <vector>

#include "api/errors.h"
#include "tests/backends/fault/fault_suite.h"

namespace distcomm {
namespace fault {
namespace {

constexpr int64_t kN = 50000;

Tensor filled(double value) {
  Tensor t = Tensor::empty({kN});
  t.fill(value);
  return t;
}

void expect_all(const Tensor& t, double want, const std::string& what) {
  for (int64_t i = 0; i < t.numel(); ++i) {
    ASSERT_EQ(t.item(i), want) << what << ": element " << i;
  }
}

TEST_P(FaultSuite, ListOpsKeepIssueOrderWithoutWaits) {
  runner().run([&](Rank& r) {
    ProcessGroupPtr pg = r.join();
    const int W = pg->size(), R = r.rank();
    {
      Tensor t = filled(1);
      std::vector<WorkPtr> works;
      for (int i = 0; i < 3; ++i) {
        std::vector<Tensor> list{t};
        works.push_back(pg->all_reduce_coalesced(list));
      }
      for (auto& w : works) w->wait();
      expect_all(t, W * W * W, "all_reduce_coalesced x3");
    }
    {
      std::vector<Tensor> ins;
      for (int k = 0; k < W; ++k) ins.push_back(filled(1));
      Tensor o = filled(-1);
      WorkPtr w1 = pg->all_reduce(ins[0]);
      WorkPtr w2 = pg->reduce_scatter(o, ins);
      w1->wait();
      w2->wait();
      expect_all(o, R == 0 ? W * W : W, "all_reduce then reduce_scatter(list)");
    }
    {
      Tensor in = filled(R + 1);
      std::vector<Tensor> outs;
      for (int k = 0; k < W; ++k) outs.push_back(Tensor::empty({kN}));
      WorkPtr w1 = pg->all_gather(outs, in);
      WorkPtr w2 = pg->all_reduce(outs[0]);
      w1->wait();
      w2->wait();
      expect_all(outs[0], W, "all_gather(list) then all_reduce(outs[0])");
    }
    {
      Tensor t = filled(R + 1);
      const int peer = R == 0 ? 1 : 0;
      std::vector<P2POp> same{P2POp::send(t, peer), P2POp::recv(t, peer)};
      EXPECT_THROW(pg->batch_isend_irecv(same), InvalidArgument);
      expect_all(t, R + 1, "a refused batch");
    }
    pg->barrier()->wait();
    r.leave(pg);
  });
}

}  // namespace
}  // namespace fault
}  // namespace distcomm
