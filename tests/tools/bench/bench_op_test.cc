#include "tools/bench/bench_op.h"

#include <gtest/gtest.h>

#include "api/errors.h"

namespace distcomm {
namespace bench {
namespace {

TEST(BenchOp, NamesRoundTrip) {
  EXPECT_EQ(all_bench_ops().size(), 10u);
  for (BenchOp op : all_bench_ops()) EXPECT_EQ(parse_bench_op(bench_op_name(op)), op);
  EXPECT_THROW(parse_bench_op("allreduce"), InvalidArgument);
}

// nccl-tests' PERFORMANCE.md factors.
TEST(BenchOp, BusFactors) {
  for (int n : {1, 2, 3, 4, 8}) {
    const double ring = static_cast<double>(n - 1) / n;
    EXPECT_DOUBLE_EQ(bus_factor(BenchOp::kAllReduce, n), 2 * ring) << n;
    for (BenchOp op : {BenchOp::kAllGather, BenchOp::kReduceScatter, BenchOp::kAllToAll, BenchOp::kGather,
                       BenchOp::kScatter}) {
      EXPECT_DOUBLE_EQ(bus_factor(op, n), ring) << bench_op_name(op) << " " << n;
    }
    for (BenchOp op : {BenchOp::kBroadcast, BenchOp::kReduce, BenchOp::kSendRecv}) {
      EXPECT_DOUBLE_EQ(bus_factor(op, n), 1.0) << bench_op_name(op);
    }
    EXPECT_DOUBLE_EQ(bus_factor(BenchOp::kBarrier, n), 0.0);
  }
  EXPECT_DOUBLE_EQ(bus_factor(BenchOp::kAllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(bus_factor(BenchOp::kAllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_factor(BenchOp::kAllReduce, 3), 4.0 / 3.0);
}

TEST(BenchOp, Columns) {
  EXPECT_TRUE(op_reduces(BenchOp::kAllReduce));
  EXPECT_TRUE(op_reduces(BenchOp::kReduce));
  EXPECT_TRUE(op_reduces(BenchOp::kReduceScatter));
  EXPECT_FALSE(op_reduces(BenchOp::kAllGather));
  EXPECT_TRUE(op_has_root(BenchOp::kScatter));
  EXPECT_FALSE(op_has_root(BenchOp::kAllReduce));
  EXPECT_FALSE(op_has_out_of_place(BenchOp::kAllReduce));  // in-place only, like torch.distributed
  EXPECT_FALSE(op_has_in_place(BenchOp::kSendRecv));
  for (BenchOp op : all_bench_ops()) {
    EXPECT_TRUE(op_has_in_place(op) || op_has_out_of_place(op)) << bench_op_name(op);
  }
}

TEST(BenchOp, BufferShapes) {
  // 1000 bytes of float32 on 3 ranks: 250 elements, chunked ops round down to 83 per rank.
  BufferShape s = buffer_shape(BenchOp::kAllReduce, 1000, 4, 3);
  EXPECT_EQ(s.send_count, 250);
  EXPECT_EQ(s.recv_count, 250);
  EXPECT_EQ(s.param_count, 250);
  EXPECT_EQ(s.bytes(4), 1000);

  s = buffer_shape(BenchOp::kAllGather, 1000, 4, 3);
  EXPECT_EQ(s.send_count, 83);
  EXPECT_EQ(s.recv_count, 249);
  EXPECT_EQ(s.param_count, 83);
  EXPECT_EQ(s.bytes(4), 996);

  s = buffer_shape(BenchOp::kReduceScatter, 1000, 4, 3);
  EXPECT_EQ(s.send_count, 249);
  EXPECT_EQ(s.recv_count, 83);

  s = buffer_shape(BenchOp::kAllToAll, 1000, 4, 3);
  EXPECT_EQ(s.send_count, 249);
  EXPECT_EQ(s.recv_count, 249);
  EXPECT_EQ(s.chunk, 83);

  s = buffer_shape(BenchOp::kScatter, 8, 4, 4);  // smaller than one element per rank
  EXPECT_EQ(s.chunk, 0);
  EXPECT_EQ(s.bytes(4), 0);

  s = buffer_shape(BenchOp::kBarrier, 1 << 20, 4, 2);
  EXPECT_EQ(s.bytes(4), 0);
}

}  // namespace
}  // namespace bench
}  // namespace distcomm
