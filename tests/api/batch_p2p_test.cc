// ProcessGroup::batch_isend_irecv on CPU tensors: what it refuses before anything is sent,
// and a ring exchange in one call through a backend that does not batch natively (gloo:
// the ops go one by one and the batch's Work ends when all have).
#include <gtest/gtest.h>

#include "api/errors.h"
#include "api/process_group.h"
#include "tests/testing/refusal.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace {

using testing::refusal;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(BatchP2PTest, ARingInOneCallMovesEveryRanksDataToTheNext) {
  testing::run_group(3, "gloo", [](ProcessGroup& pg) {
    const int next = (pg.rank() + 1) % pg.size(), prev = (pg.rank() + pg.size() - 1) % pg.size();
    Tensor out = Tensor::of<float>({1.0f * pg.rank(), 10.0f});
    Tensor in = Tensor::of<float>({-1.0f, -1.0f});
    Tensor in2 = Tensor::of<int64_t>({-1});
    std::vector<P2POp> ops{P2POp::send(out, next), P2POp::recv(in, prev), P2POp::send(Tensor::of<int64_t>({7}), prev),
                           P2POp::recv(in2, next)};
    WorkPtr w = pg.batch_isend_irecv(ops);
    w->wait();
    EXPECT_TRUE(w->is_success());
    EXPECT_EQ(w->op(), OpType::kBatchP2P);
    EXPECT_EQ(in.to_doubles(), (std::vector<double>{1.0 * prev, 10.0}));
    EXPECT_EQ(in2.item(0), 7.0);
  });
}

TEST(BatchP2PTest, BadBatchesAreRefusedBeforeAnythingIsSent) {
  testing::run_group(2, "gloo", [](ProcessGroup& pg) {
    std::vector<P2POp> empty;
    EXPECT_TRUE(contains(refusal([&] { pg.batch_isend_irecv(empty); }), "batch_isend_irecv: the batch is empty"));
    Tensor t = Tensor::of<float>({1.0f});
    std::vector<P2POp> to_self{P2POp::send(t, 1 - pg.rank()), P2POp::recv(t, pg.rank())};
    const std::string m = refusal([&] { pg.batch_isend_irecv(to_self); });
    EXPECT_TRUE(contains(m, "the batch sends this rank itself 0 tensors and receives 1 from itself")) << m;
    Tensor wide = Tensor::of<double>({0.0});
    std::vector<P2POp> unlike{P2POp::send(t, pg.rank()), P2POp::recv(wide, pg.rank())};
    const std::string m2 = refusal([&] { pg.batch_isend_irecv(unlike); });
    EXPECT_TRUE(contains(m2, "ops[0] sends this rank itself float32[1] on cpu but ops[1], the recv from itself it "
                             "pairs with, holds float64[1] on cpu"))
        << m2;
    EXPECT_EQ(wide.item(0), 0.0) << "a refused batch copied";
    std::vector<P2POp> outside{P2POp::send(t, 5)};
    EXPECT_TRUE(contains(refusal([&] { pg.batch_isend_irecv(outside); }), "ops[0].peer 5 is outside [0, 2)"));
    float word = 0;
    std::vector<P2POp> mixed{P2POp::send(t, 1 - pg.rank()),
                             P2POp::recv(Tensor::from_blob(&word, {1}, DType::kFloat32, Device::cuda(0)), 1 - pg.rank())};
    EXPECT_TRUE(contains(refusal([&] { pg.batch_isend_irecv(mixed); }), "one batch goes to one backend"));
    P2POptions tagged;
    tagged.tag = -1;
    std::vector<P2POp> one{P2POp::send(t, 1 - pg.rank())};
    EXPECT_TRUE(contains(refusal([&] { pg.batch_isend_irecv(one, tagged); }), "tag must be >= 0"));
    // Nothing was sent: a plain exchange still pairs up.
    Tensor got = Tensor::of<float>({0.0f});
    std::vector<P2POp> ok{P2POp::send(Tensor::of<float>({2.0f + pg.rank()}), 1 - pg.rank()),
                          P2POp::recv(got, 1 - pg.rank())};
    pg.batch_isend_irecv(ok)->wait();
    EXPECT_EQ(got.item(0), 3.0 - pg.rank());
  });
}

// A batch for a device the group has no backend for is refused as every op's errors are:
// "rank R/N group 'NAME' batch_isend_irecv: ..." (it once said the group's message bare).
TEST(BatchP2PTest, ABatchWithoutABackendSaysSoAsTheOp) {
  testing::run_group(2, "gloo", [](ProcessGroup& pg) {
    float word = 0;
    std::vector<P2POp> on_cuda{
        P2POp::send(Tensor::from_blob(&word, {1}, DType::kFloat32, Device::cuda(0)), 1 - pg.rank())};
    const std::string m = refusal([&] { pg.batch_isend_irecv(on_cuda); });
    EXPECT_EQ(m.rfind("rank " + std::to_string(pg.rank()) + "/2 group 'world' batch_isend_irecv: group 'world' "
                      "(backend 'gloo') has no backend for cuda tensors", 0), 0u)
        << m;
  });
}

// All-to-all written as NCCL users write it: one batch of a send to and a recv from every
// rank, this one included (NCCL takes pairs with itself in a batch; here they are copied
// and the rest goes to the backend). And a batch of nothing but pairs with itself.
class BatchWithItself : public ::testing::TestWithParam<std::string> {};

TEST_P(BatchWithItself, AnAllToAllBatchIncludesThisRankItself) {
  testing::run_group(3, GetParam(), [](ProcessGroup& pg) {
    const int n = pg.size(), me = pg.rank();
    std::vector<Tensor> out, in;
    std::vector<P2POp> ops;
    for (int peer = 0; peer < n; ++peer) {
      out.push_back(Tensor::of<int32_t>({100 * me + peer, -1}));
      in.push_back(Tensor::of<int32_t>({0, 0}));
    }
    for (int peer = 0; peer < n; ++peer) {
      ops.push_back(P2POp::send(out[static_cast<size_t>(peer)], peer));
      ops.push_back(P2POp::recv(in[static_cast<size_t>(peer)], peer));
    }
    pg.batch_isend_irecv(ops)->wait();
    for (int peer = 0; peer < n; ++peer) {
      EXPECT_EQ(in[static_cast<size_t>(peer)].to_doubles(), (std::vector<double>{100.0 * peer + me, -1.0}))
          << "rank " << me << " from " << peer;
    }
    Tensor a = Tensor::of<float>({1.5f}), b = Tensor::of<float>({0.0f});
    std::vector<P2POp> alone{P2POp::recv(b, me), P2POp::send(a, me)};
    WorkPtr w = pg.batch_isend_irecv(alone);
    EXPECT_TRUE(w->is_completed());
    w->wait();
    EXPECT_EQ(b.item(0), 1.5);
  });
}

INSTANTIATE_TEST_SUITE_P(Backends, BatchWithItself, ::testing::Values("gloo", "shm"));

}  // namespace
}  // namespace distcomm
