// Issue order covers the list forms (api/ops/op_overlaps.h, docs/backends.md): a list op
// packs its inputs only after the group's earlier ops that write them have ended, and a
// later op on a list op's outputs waits for their write-back. Every case issues its ops
// without waiting in between and wants the chained result torch gives. Also the flat ops
// whose input partly overlaps their output (gathered or reduced through a buffer, in-place
// forms kept), and batches that receive into memory they also send or receive.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "api/errors.h"
#include "api/process_group.h"
#include "tests/testing/refusal.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace {

constexpr int64_t kN = 100000;  // large enough that no backend runs the op within issue

Tensor filled(int64_t n, double value) {
  Tensor t = Tensor::empty({n});
  t.fill(value);
  return t;
}

// Every element of t equals want (the first that does not is reported).
void expect_all(const Tensor& t, double want, const std::string& what) {
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (t.item(i) != want) {
      ADD_FAILURE() << what << ": element " << i << " is " << t.item(i) << ", want " << want;
      return;
    }
  }
}

class ListOpOrdering : public ::testing::TestWithParam<std::string> {};

TEST_P(ListOpOrdering, ChainedCoalescedAllReducesReadEachOthersResults) {
  testing::run_group(2, GetParam(), [](ProcessGroup& pg) {
    Tensor t = filled(kN, 1);
    std::vector<WorkPtr> works;
    for (int i = 0; i < 5; ++i) {
      std::vector<Tensor> list{t};
      works.push_back(pg.all_reduce_coalesced(list));
    }
    for (auto& w : works) w->wait();
    expect_all(t, 32, "all_reduce_coalesced x5 on rank " + std::to_string(pg.rank()));
  });
}

TEST_P(ListOpOrdering, AListOpPacksWhatAnEarlierOpWrote) {
  testing::run_group(3, GetParam(), [](ProcessGroup& pg) {
    const int W = pg.size(), R = pg.rank();
    {  // reduce_scatter of a list after an all_reduce of one of its inputs
      std::vector<Tensor> ins;
      for (int r = 0; r < W; ++r) ins.push_back(filled(kN, 1));
      Tensor o = filled(kN, -1);
      WorkPtr w1 = pg.all_reduce(ins[0]);
      WorkPtr w2 = pg.reduce_scatter(o, ins);
      w1->wait();
      w2->wait();
      expect_all(o, R == 0 ? W * W : W, "all_reduce then reduce_scatter(list)");
    }
    {  // scatter of a list (packed: the same tensor W times) after an all_reduce of it
      Tensor x = filled(kN, 1);
      Tensor o = filled(kN, -1);
      std::vector<Tensor> ins;
      if (R == 0) ins.assign(static_cast<size_t>(W), x);
      WorkPtr w1 = pg.all_reduce(x);
      WorkPtr w2 = pg.scatter(o, ins);
      w1->wait();
      w2->wait();
      expect_all(o, W, "all_reduce then scatter(list)");
    }
    {  // all_to_all of lists after a broadcast into one of its inputs
      std::vector<Tensor> ins, outs;
      for (int r = 0; r < W; ++r) {
        ins.push_back(filled(kN, R + 1));
        outs.push_back(filled(kN, -1));
      }
      WorkPtr w1 = pg.broadcast(ins[static_cast<size_t>(R)]);  // rank 0's value, 1
      WorkPtr w2 = pg.all_to_all(outs, ins);
      w1->wait();
      w2->wait();
      expect_all(outs[static_cast<size_t>(R)], 1, "broadcast then all_to_all(lists), own block");
    }
    {  // a coalesced all_reduce after a recv into its tensor
      Tensor t = filled(kN, R == 0 ? 0 : 7);
      WorkPtr p2p;
      if (R == 0) p2p = pg.recv(t, 1);
      if (R == 1) p2p = pg.send(t, 0);
      std::vector<Tensor> list{t};
      WorkPtr w = pg.all_reduce_coalesced(list);
      if (p2p) p2p->wait();
      w->wait();
      expect_all(t, 7 * W, "recv then all_reduce_coalesced");
    }
  });
}

TEST_P(ListOpOrdering, ALaterOpWaitsForAListOpsWriteBack) {
  testing::run_group(2, GetParam(), [](ProcessGroup& pg) {
    const int W = pg.size(), R = pg.rank();
    {
      Tensor in = filled(kN, R + 1);
      std::vector<Tensor> outs;
      for (int r = 0; r < W; ++r) outs.push_back(Tensor::empty({kN}));
      WorkPtr w1 = pg.all_gather(outs, in);
      WorkPtr w2 = pg.all_reduce(outs[0]);
      w1->wait();
      w2->wait();
      expect_all(outs[0], W, "all_gather(list) then all_reduce(outs[0])");
      expect_all(outs[1], 2, "all_gather(list) then all_reduce(outs[0]), outs[1]");
    }
    {  // a list op's output written by a later flat op: the write-back must not land after it
      std::vector<Tensor> list{filled(kN, 1)};
      WorkPtr w1 = pg.all_reduce_coalesced(list);
      WorkPtr w2 = pg.broadcast(list[0]);
      w1->wait();
      w2->wait();
      expect_all(list[0], W, "all_reduce_coalesced then broadcast");
    }
    {  // gather's write-back on the root, then a send of it
      Tensor in = filled(kN, R + 1);
      std::vector<Tensor> outs;
      if (R == 0) {
        for (int r = 0; r < W; ++r) outs.push_back(filled(kN, -1));
      }
      WorkPtr w1 = pg.gather(outs, in);
      Tensor got = filled(kN, -1);
      WorkPtr w2 = R == 0 ? pg.send(outs[1], 1) : pg.recv(got, 0);
      w1->wait();
      w2->wait();
      if (R == 1) expect_all(got, 2, "gather then send of the gathered tensor");
    }
  });
}

TEST_P(ListOpOrdering, FlatOpsWithPartlyOverlappingInputAndOutput) {
  testing::run_group(2, GetParam(), [](ProcessGroup& pg) {
    const int W = pg.size(), R = pg.rank();
    for (const int64_t n : {int64_t{1}, int64_t{5}, int64_t{4096}, int64_t{100003}}) {
    auto expect_blocks = [&](const Tensor& out, const std::string& what) {
      for (int64_t i = 0; i < W * n; ++i) {
        if (out.item(i) != static_cast<double>((i / n) * 1000 + (i % n) % 100)) {
          ADD_FAILURE() << what << " on rank " << R << ": element " << i << " is " << out.item(i);  // NOLINT
          return;
        }
      }
    };
    for (int shift : {0, 1, -1}) {  // 0: the in-place form (input is this rank's block)
      Tensor buffer = Tensor::zeros({W * n + 2});
      Tensor out = buffer.flat_slice(1, W * n);
      Tensor in = buffer.flat_slice(1 + R * n + shift, n);
      for (int64_t i = 0; i < n; ++i) in.set_item(i, R * 1000 + i % 100);
      pg.all_gather_into_tensor(out, in)->wait();
      expect_blocks(out, "all_gather_into_tensor, n=" + std::to_string(n) + ", input shifted by " + std::to_string(shift));
    }
    {  // input: another rank's block of the output
      Tensor out = Tensor::zeros({W * n});
      Tensor in = out.flat_slice(((R + 1) % W) * n, n);
      for (int64_t i = 0; i < n; ++i) in.set_item(i, R * 1000 + i % 100);
      pg.all_gather_into_tensor(out, in)->wait();
      expect_blocks(out, "all_gather_into_tensor, input another block");
    }
    for (int shift : {0, 1, -1}) {  // 0: the in-place form (output is this rank's block)
      Tensor buffer = Tensor::zeros({W * n + 2});
      Tensor in = buffer.flat_slice(1, W * n);
      for (int64_t i = 0; i < W * n; ++i) in.set_item(i, (R + 1) * (i / n + 1));
      Tensor out = buffer.flat_slice(1 + R * n + shift, n);
      pg.reduce_scatter_tensor(out, in)->wait();
      // rank R gets block R summed over ranks: (1 + ... + W) * (R + 1)
      expect_all(out, (W * (W + 1) / 2) * (R + 1),
                 "reduce_scatter_tensor, n=" + std::to_string(n) + ", output shifted by " + std::to_string(shift));
    }
    }
  });
}

using testing::refusal;

TEST_P(ListOpOrdering, ABatchThatReceivesIntoMemoryItAlsoUsesIsRefused) {
  testing::run_group(2, GetParam(), [](ProcessGroup& pg) {
    const int R = pg.rank(), peer = 1 - R;
    Tensor t = filled(8, R + 1);
    std::vector<P2POp> same{P2POp::send(t, peer), P2POp::recv(t, peer)};
    std::string m = refusal([&] { pg.batch_isend_irecv(same); });
    EXPECT_NE(m.find("ops[0] (a send) and ops[1] (a recv) share memory"), std::string::npos) << m;
    Tensor wide = filled(16, R + 1);
    std::vector<P2POp> overlapping{P2POp::send(Tensor::of<float>({1.0f}), peer), P2POp::recv(wide.flat_slice(0, 8), peer),
                                   P2POp::send(wide.flat_slice(7, 8), peer)};
    m = refusal([&] { pg.batch_isend_irecv(overlapping); });
    EXPECT_NE(m.find("ops[1] (a recv) and ops[2] (a send) share memory"), std::string::npos) << m;
    std::vector<P2POp> two_recvs{P2POp::recv(wide.flat_slice(0, 8), peer), P2POp::recv(wide.flat_slice(4, 8), peer)};
    m = refusal([&] { pg.batch_isend_irecv(two_recvs); });
    EXPECT_NE(m.find("ops[0] (a recv) and ops[1] (a recv) share memory"), std::string::npos) << m;
    std::vector<P2POp> itself{P2POp::send(t, R), P2POp::recv(t, R)};
    m = refusal([&] { pg.batch_isend_irecv(itself); });
    EXPECT_NE(m.find("ops[0] (a send) and ops[1] (a recv) share memory"), std::string::npos) << m;
    expect_all(t, R + 1, "a refused batch");
    // Nothing was sent: sends sharing memory are fine, and a plain exchange still pairs up.
    Tensor got = filled(8, -1), got2 = filled(8, -1);
    std::vector<P2POp> ok{P2POp::send(t, peer), P2POp::send(t, peer), P2POp::recv(got, peer), P2POp::recv(got2, peer)};
    pg.batch_isend_irecv(ok)->wait();
    expect_all(got, peer + 1, "the exchange after the refusals");
    expect_all(got2, peer + 1, "the exchange after the refusals");
  });
}

INSTANTIATE_TEST_SUITE_P(Backends, ListOpOrdering, ::testing::Values("gloo", "shm"));

}  // namespace
}  // namespace distcomm
