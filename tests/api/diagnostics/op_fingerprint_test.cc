// OpFingerprint: which fields the agreement hash covers, descriptions, the text form, and
// the tables a Desync prints.
#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

#include "api/diagnostics/op_fingerprint.h"

namespace distcomm {
namespace {

// The layout plugins were built against (ABI 1.x, plugin.h): shm and mpi build
// OpFingerprint objects and hand vectors of them to the core (fingerprint_table,
// all_to_all_mismatches), and OpFingerprint::decode returns one into the plugin's buffer, so
// its size and its fields' places are the plugins' as much as the core's. A field appended
// (4357c79's ordinal_epoch: 176 -> 184 bytes) walked a minor-9 plugin's vectors with the
// wrong stride at its first Desync. Checked where the numbers are known: x86-64 and aarch64
// Linux with libstdc++ (24-byte vectors).
TEST(OpFingerprint, KeepsTheLayoutPluginsWereBuiltAgainst) {
#if defined(__GLIBCXX__) && defined(__LP64__) && (defined(__x86_64__) || defined(__aarch64__))
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winvalid-offsetof"
  EXPECT_EQ(sizeof(OpFingerprint), 176u);
  EXPECT_EQ(alignof(OpFingerprint), 8u);
  EXPECT_EQ(offsetof(OpFingerprint, seq), 8u);
  EXPECT_EQ(offsetof(OpFingerprint, count), 24u);
  EXPECT_EQ(offsetof(OpFingerprint, root), 88u);
  EXPECT_EQ(offsetof(OpFingerprint, ordinal), 96u);
  EXPECT_EQ(offsetof(OpFingerprint, send_counts), 128u);
  // The last field ends the struct: nothing was appended after it.
  EXPECT_EQ(offsetof(OpFingerprint, recv_counts) + sizeof(std::vector<int64_t>), sizeof(OpFingerprint));
#pragma GCC diagnostic pop
#else
  GTEST_SKIP() << "the 1.x layout's numbers are known for x86-64 and aarch64 Linux with libstdc++ only";
#endif
}

OpFingerprint all_reduce_of(const Tensor& t, uint64_t seq = 11) {
  OpFingerprint f;
  f.op = OpType::kAllReduce;
  f.seq = seq;
  f.set_tensor(t);
  f.has_reduction = true;
  return f;
}

TEST(OpFingerprint, AgreementHashCoversWhatRanksMustAgreeOn) {
  const OpFingerprint base = all_reduce_of(Tensor::zeros({10}));
  EXPECT_EQ(base.agreement_hash(), all_reduce_of(Tensor::zeros({10})).agreement_hash());
  // The shape may differ where the count agrees.
  EXPECT_EQ(base.agreement_hash(), all_reduce_of(Tensor::zeros({2, 5})).agreement_hash());

  std::vector<OpFingerprint> others;
  others.push_back(all_reduce_of(Tensor::zeros({20})));
  others.push_back(all_reduce_of(Tensor::zeros({10}, DType::kInt32)));
  others.push_back(all_reduce_of(Tensor::zeros({10}), 12));
  OpFingerprint max = base;
  max.reduction = ReduceOp::MAX;
  others.push_back(max);
  OpFingerprint scaled = base;
  scaled.reduction = ReduceOp::premul_sum(0.5);
  OpFingerprint scaled_more = base;
  scaled_more.reduction = ReduceOp::premul_sum(0.25);
  others.push_back(scaled);
  others.push_back(scaled_more);
  OpFingerprint broadcast = base;
  broadcast.op = OpType::kBroadcast;
  broadcast.has_reduction = false;
  broadcast.root = 0;
  OpFingerprint broadcast_from_1 = broadcast;
  broadcast_from_1.root = 1;
  others.push_back(broadcast);
  others.push_back(broadcast_from_1);
  OpFingerprint internal = base;
  internal.internal = true;
  others.push_back(internal);
  for (size_t i = 0; i < others.size(); ++i) {
    EXPECT_NE(base.agreement_hash(), others[i].agreement_hash()) << others[i].describe();
    for (size_t j = 0; j < i; ++j) EXPECT_NE(others[i].agreement_hash(), others[j].agreement_hash());
  }
}

TEST(OpFingerprint, AllToAllAgreesOnOpAndDtypeOnly) {
  OpFingerprint a;
  a.op = OpType::kAllToAll;
  a.set_tensor(Tensor::zeros({3}));
  a.send_counts = {1, 2};
  a.recv_counts = {1, 3};
  OpFingerprint b = a;
  b.set_tensor(Tensor::zeros({8}));
  b.send_counts = {3, 5};
  b.recv_counts = {2, 5};
  EXPECT_EQ(a.agreement_hash(), b.agreement_hash());
  EXPECT_EQ(all_to_all_mismatches({a, b}), "");
  b.send_counts = {4, 5};
  EXPECT_EQ(all_to_all_mismatches({a, b}), "  rank 1 sends 4 elements to rank 0, which expects 3\n");
}

// The sum over ranks is 0 exactly when every pair agrees: one integer per rank checks them.
TEST(OpFingerprint, SplitPairsSumIsZeroOnlyWhenEveryPairAgrees) {
  OpFingerprint a, b, c;
  for (OpFingerprint* f : {&a, &b, &c}) f->op = OpType::kAllToAll;
  a.send_counts = {1, 2, 3};  // rank 0 sends 2 to rank 1, 3 to rank 2
  a.recv_counts = {1, 4, 5};
  b.send_counts = {4, 0, 6};
  b.recv_counts = {2, 0, 7};
  c.send_counts = {5, 7, 0};
  c.recv_counts = {3, 6, 0};
  EXPECT_EQ(a.split_pairs_sum(0) + b.split_pairs_sum(1) + c.split_pairs_sum(2), 0u);
  c.recv_counts = {3, 7, 0};  // expects 7 from rank 1, which sends 6
  EXPECT_NE(a.split_pairs_sum(0) + b.split_pairs_sum(1) + c.split_pairs_sum(2), 0u);
  // Swapped counts between two pairs do not cancel out.
  c.recv_counts = {6, 3, 0};
  EXPECT_NE(a.split_pairs_sum(0) + b.split_pairs_sum(1) + c.split_pairs_sum(2), 0u);
}

TEST(OpFingerprint, PointToPointHashPairsSendAndRecv) {
  OpFingerprint send;
  send.op = OpType::kSend;
  send.p2p = true;
  send.set_tensor(Tensor::zeros({4}));
  send.root = 1;
  OpFingerprint recv = send;
  recv.op = OpType::kRecv;
  recv.seq = 7;
  recv.root = 0;
  EXPECT_EQ(send.p2p_hash(), recv.p2p_hash());
  recv.set_tensor(Tensor::zeros({2}));
  EXPECT_NE(send.p2p_hash(), recv.p2p_hash());
  recv.set_tensor(Tensor::zeros({4}, DType::kInt32));
  EXPECT_NE(send.p2p_hash(), recv.p2p_hash());
  recv = send;
  recv.tag = 1;
  EXPECT_NE(send.p2p_hash(), recv.p2p_hash());
}

TEST(OpFingerprint, Describes) {
  OpFingerprint f = all_reduce_of(Tensor::zeros({2, 5}));
  EXPECT_EQ(f.describe(), "all_reduce #11 float32[2, 5] sum");
  f.reduction = ReduceOp::premul_sum(0.5);
  EXPECT_EQ(f.describe(), "all_reduce #11 float32[2, 5] premul_sum(0.5)");
  OpFingerprint b;
  b.op = OpType::kBroadcast;
  b.seq = 3;
  b.set_tensor(Tensor::zeros({4}, DType::kInt64));
  b.root = 1;
  EXPECT_EQ(b.describe(), "broadcast #3 int64[4] root 1");
  OpFingerprint s;
  s.op = OpType::kSend;
  s.p2p = true;
  s.seq = 4;
  s.set_tensor(Tensor::zeros({4}));
  s.root = 2;
  s.ordinal = 1;
  EXPECT_EQ(s.describe(), "send p2p#4 float32[4] to 2 tag 0 (transfer 1)");
  s.op = OpType::kRecvAnySource;
  s.root = -1;
  s.ordinal = -1;
  EXPECT_EQ(s.describe(), "recv_any_source p2p#4 float32[4] from any rank tag 0");
  OpFingerprint barrier;
  barrier.seq = 2;
  EXPECT_EQ(barrier.describe(), "barrier #2");
}

TEST(OpFingerprint, DeepShapesFoldIntoTheLastDimension) {
  OpFingerprint f;
  f.set_tensor(Tensor::zeros({1, 2, 1, 2, 1, 2, 3}));
  EXPECT_EQ(f.count, 24);
  EXPECT_EQ(f.shape(), (std::vector<int64_t>{1, 2, 1, 2, 1, 6}));
}

TEST(OpFingerprint, DifferencesNameTheFields) {
  OpFingerprint a = all_reduce_of(Tensor::zeros({10}));
  OpFingerprint b = all_reduce_of(Tensor::zeros({20}, DType::kInt32));
  b.reduction = ReduceOp::MAX;
  EXPECT_EQ(a.differences(b), "dtype float32 vs int32, count 10 vs 20, reduction sum vs max");
  EXPECT_EQ(a.differences(all_reduce_of(Tensor::zeros({2, 5}))), "");
  EXPECT_EQ(a.differences(all_reduce_of(Tensor::zeros({2, 5})), /*shapes=*/true), "shape [10] vs [2, 5]");
}

TEST(OpFingerprint, EncodesAndDecodes) {
  OpFingerprint f = all_reduce_of(Tensor::zeros({3, 4}, DType::kBFloat16), 1ull << 40);
  f.reduction = ReduceOp::premul_sum(1.0 / 3);
  f.op = OpType::kAllToAll;
  f.send_counts = {1, 2, 3};
  f.recv_counts = {4, 5};
  f.root = -1;
  f.tag = 9;
  f.ordinal = -1;
  f.p2p = true;
  f.internal = true;
  const auto back = OpFingerprint::decode(f.encode());
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->encode(), f.encode());
  EXPECT_EQ(back->agreement_hash(), f.agreement_hash());
  EXPECT_EQ(back->reduction.factor, f.reduction.factor);
  EXPECT_EQ(back->shape(), f.shape());
  EXPECT_EQ(back->describe(), f.describe());
  for (const std::string bad : {"", "fp1", "fp2 0 0 0 0 0 0 0 0", "fp1 99 0 0 0 0 0 0 0", "fp1 0 0 0 0 0 0 0 9"}) {
    EXPECT_FALSE(OpFingerprint::decode(bad).has_value()) << bad;
  }
}

TEST(OpFingerprint, TableGroupsRanksThatAgree) {
  std::vector<std::optional<OpFingerprint>> by_rank = {all_reduce_of(Tensor::zeros({10})),
                                                       all_reduce_of(Tensor::zeros({20})),
                                                       all_reduce_of(Tensor::zeros({10})), std::nullopt};
  EXPECT_EQ(fingerprint_table(by_rank, "(did not answer)"),
            "  ranks [0, 2]: all_reduce #11 float32[10] sum\n"
            "  rank 1:       all_reduce #11 float32[20] sum\n"
            "  rank 3:       (did not answer)\n");
}

}  // namespace
}  // namespace distcomm
