// The stall watch's size-mismatch verdict where the two sides' bounded ordinals differ
// (p2p_verdict.h): a pair that used more than 256 tags in different orders numbers one tag's
// transfers otherwise on each side, and pairing them by (tag, ordinal) matched a legal
// pending recv with an unrelated send of another size. Built through OpNumbering, as the
// ProcessGroup numbers ops, and the reports the watches would publish.
#include "api/diagnostics/p2p_verdict.h"

#include <gtest/gtest.h>

#include "api/ops/op_numbering.h"
#include "api/tensor.h"

namespace distcomm {
namespace {

constexpr int kTag = 0;
constexpr int64_t kWaited = 5000;  // past any probe_after

OpFingerprint p2p(OpNumbering& numbering, OpType type, int peer, int tag, int64_t count) {
  Tensor t = Tensor::empty({count});
  OpSpec spec;
  spec.type = type;
  spec.kind = OpKind::kPointToPoint;
  spec.tensor = &t;
  spec.root = peer;
  spec.tag = tag;
  return numbering.next(spec).fingerprint;
}

ProgressReport report(int rank, std::vector<OpFingerprint> pending) {
  ProgressReport r;
  r.rank = rank;
  for (OpFingerprint& f : pending) r.pending.push_back({std::move(f), kWaited});
  // Through the text the board carries, as a peer reads it.
  return *ProgressReport::decode(r.encode());
}

// Rank 0 sends rank 1 two messages with tag 0 (4 elements, then 8) among 256 others; rank 1
// posts its recvs of the others in another order. Rank 0 used 256 other tags between its two
// messages of tag 0 and dropped its count (the second numbered 0 again); rank 1 used tag 0
// again halfway and kept it (the second numbered 1).
struct TwoOrders {
  OpNumbering sender{"", std::chrono::seconds(5)};
  OpNumbering receiver{"", std::chrono::seconds(5)};
  OpFingerprint send_first, send_second, recv_first, recv_second;

  TwoOrders(int64_t first_count, int64_t second_count) {
    const int others = static_cast<int>(OpNumbering::kTagsPerPeer);
    send_first = p2p(sender, OpType::kSend, 1, kTag, first_count);
    for (int k = 1; k <= others; ++k) p2p(sender, OpType::kSend, 1, k, 1);
    send_second = p2p(sender, OpType::kSend, 1, kTag, second_count);
    recv_first = p2p(receiver, OpType::kRecv, 0, kTag, first_count);
    for (int k = 1; k <= others / 2; ++k) p2p(receiver, OpType::kRecv, 0, k, 1);
    recv_second = p2p(receiver, OpType::kRecv, 0, kTag, second_count);
    for (int k = others / 2 + 1; k <= others; ++k) p2p(receiver, OpType::kRecv, 0, k, 1);
  }
};

TEST(P2PVerdict, OrdinalsOfPairsThatDroppedTagsInOtherOrdersAreNotPaired) {
  TwoOrders job(4, 8);
  // The situation: the sender's second transfer and the receiver's first share ordinal 0.
  ASSERT_EQ(job.send_second.ordinal, 0);
  ASSERT_EQ(job.recv_first.ordinal, 0);
  ASSERT_EQ(job.recv_second.ordinal, 1);
  // The first send has ended (its bytes are on the way), the first recv waits for them
  // (a slow transfer, legal); the second pair is posted on both sides.
  const std::vector<std::optional<ProgressReport>> reports = {
      report(0, {job.send_second}),
      report(1, {job.recv_first, job.recv_second}),
  };
  // Paired by (tag, ordinal) alone, the first recv (4) met the second send (8).
  const Verdict plain = compare_reports(reports, 1, 3000);
  ASSERT_EQ(plain.kind, Verdict::Kind::kSizeMismatch) << "the defect's situation is no longer built";
  EXPECT_NE(plain.message.find("holds 4 float32"), std::string::npos) << plain.message;

  EXPECT_FALSE(ordinals_comparable(reports, 0, 1, kTag));
  for (int rank : {0, 1}) {
    const Verdict v = comparable_verdict(reports, rank, 3000);
    EXPECT_EQ(v.kind, Verdict::Kind::kNone) << "rank " << rank << ": " << v.message;
  }
}

TEST(P2PVerdict, AMismatchIsStillFoundWhereBothSidesDroppedTagsAlike) {
  // The same order on both sides (recvs posted as the sends went): both drop tag 0 alike, so
  // their ordinals and epochs agree, and a real mismatch (4 sent, 6 received) is named.
  OpNumbering sender("", std::chrono::seconds(5)), receiver("", std::chrono::seconds(5));
  for (int k = 0; k < 3 * static_cast<int>(OpNumbering::kTagsPerPeer); ++k) {
    p2p(sender, OpType::kSend, 1, 1000 + k, 1);
    p2p(receiver, OpType::kRecv, 0, 1000 + k, 1);
  }
  p2p(sender, OpType::kSend, 1, kTag, 4);
  p2p(receiver, OpType::kRecv, 0, kTag, 4);
  for (int k = 0; k < 300; ++k) {
    p2p(sender, OpType::kSend, 1, 5000 + k, 1);
    p2p(receiver, OpType::kRecv, 0, 5000 + k, 1);
  }
  const OpFingerprint send = p2p(sender, OpType::kSend, 1, kTag, 4);
  const OpFingerprint recv = p2p(receiver, OpType::kRecv, 0, kTag, 6);
  ASSERT_NE(send.ordinal_epoch, 0u) << "the pair has dropped tags";
  ASSERT_EQ(send.ordinal_epoch, recv.ordinal_epoch);
  ASSERT_EQ(send.ordinal, recv.ordinal);
  const std::vector<std::optional<ProgressReport>> reports = {report(0, {send}), report(1, {recv})};
  for (int rank : {0, 1}) {
    const Verdict v = comparable_verdict(reports, rank, 3000);
    EXPECT_EQ(v.kind, Verdict::Kind::kSizeMismatch) << "rank " << rank;
  }
}

TEST(P2PVerdict, AnUncomparablePairDoesNotHideAnotherPairsMismatch) {
  // Rank 1's false pairing with rank 0 is set aside; its real mismatch with rank 2 is named.
  TwoOrders job(4, 8);
  OpNumbering third("", std::chrono::seconds(5));
  const OpFingerprint send_from_2 = p2p(third, OpType::kSend, 1, 7, 10);
  const OpFingerprint recv_from_2 = p2p(job.receiver, OpType::kRecv, 2, 7, 12);
  const std::vector<std::optional<ProgressReport>> reports = {
      report(0, {job.send_second}),
      report(1, {job.recv_first, job.recv_second, recv_from_2}),
      report(2, {send_from_2}),
  };
  const Verdict v = comparable_verdict(reports, 1, 3000);
  ASSERT_EQ(v.kind, Verdict::Kind::kSizeMismatch);
  ASSERT_TRUE(v.op);
  EXPECT_EQ(v.op->root, 2) << v.message;
}

TEST(P2PVerdict, TheEpochTravelsInTheFingerprintsLine) {
  OpFingerprint f;
  f.p2p = true;
  f.op = OpType::kSend;
  f.ordinal_epoch = 0xfedcba9876543210ULL;
  const auto back = OpFingerprint::decode(f.encode());
  ASSERT_TRUE(back);
  EXPECT_EQ(back->ordinal_epoch, f.ordinal_epoch);
  // A line of before the field: read, with epoch 0.
  std::string old = f.encode();
  old.erase(old.rfind(' '));
  const auto older = OpFingerprint::decode(old);
  ASSERT_TRUE(older);
  EXPECT_EQ(older->ordinal_epoch, 0u);
}

}  // namespace
}  // namespace distcomm
