// DISTCOMM_DEBUG=DETAIL on a backend that takes whole batches (nccl does; here the
// in_process test plugin, told to offer batch_isend_irecv): each send and recv of the batch
// is checked as the single ops are. 3 ranks of one process.
#include <gtest/gtest.h>

#include "api/errors.h"
#include "tests/testing/in_process_group.h"

namespace distcomm {
namespace {

std::vector<ProcessGroupPtr> detail_world() {
  testing::InProcessOptions o;
  o.config["in_process_ops"] = "all,batch_isend_irecv";
  o.debug = DebugLevel::kDetail;
  return testing::in_process_world(3, o);
}

TEST(DetailNativeBatch, MatchingBatchesDeliver) {
  testing::on_every_rank(detail_world(), [](ProcessGroup& pg) {
    const int right = (pg.rank() + 1) % 3, left = (pg.rank() + 2) % 3;
    Tensor out = Tensor::of<float>({1.0f * pg.rank(), 2.0f}), in = Tensor::zeros({2});
    Tensor out_ints = Tensor::of<int64_t>({7}), in_ints = Tensor::zeros({1}, DType::kInt64);
    std::vector<P2POp> ops{P2POp::send(out, right), P2POp::recv(in, left), P2POp::send(out_ints, left),
                           P2POp::recv(in_ints, right)};
    WorkPtr w = pg.batch_isend_irecv(ops);
    w->wait();
    EXPECT_NE(w->description().find("sends and receives"), std::string::npos)
        << "the backend took the batch whole: " << w->description();
    EXPECT_EQ(in.item(0), left);
    EXPECT_EQ(in_ints.item(0), 7);
  });
}

// Rank 0's batch sends float32[4] to rank 1, whose batch receives it into int32[4] (the same
// bytes, which the backend delivers): rank 1's batch fails naming both sides.
TEST(DetailNativeBatch, ARecvOfAnotherDtypeIsNamed) {
  testing::on_every_rank(detail_world(), [](ProcessGroup& pg) {
    if (pg.rank() == 0) {
      std::vector<P2POp> ops{P2POp::send(Tensor::zeros({4}), 1)};
      pg.batch_isend_irecv(ops)->wait();
    } else if (pg.rank() == 1) {
      std::vector<P2POp> ops{P2POp::recv(Tensor::zeros({4}, DType::kInt32), 0)};
      try {
        pg.batch_isend_irecv(ops)->wait();
        ADD_FAILURE() << "the batch succeeded";
      } catch (const InvalidArgument& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("DISTCOMM_DEBUG=DETAIL"), std::string::npos) << msg;
        EXPECT_NE(msg.find("recv p2p#0 int32[4] from 0"), std::string::npos) << msg;
        EXPECT_NE(msg.find("received rank 0's send p2p#0 float32[4] to 1"), std::string::npos) << msg;
      }
    }
  });
}

}  // namespace
}  // namespace distcomm
