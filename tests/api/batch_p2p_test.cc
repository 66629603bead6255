// ProcessGroup::batch_isend_irecv on CPU tensors: what it refuses before anything is sent,
// and a ring exchange in one call through a backend that does not batch natively (gloo:
// the ops go one by one and the batch's Work ends when all have).
#include <gtest/gtest.h>

#include "api/errors.h"
#include "api/process_group.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace {

template <typename Fn>
std::string refusal(Fn fn) {
  try {
    fn();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "accepted";
}

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
    EXPECT_TRUE(contains(m, "ops[1].peer is this rank itself")) << m;
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

}  // namespace
}  // namespace distcomm
