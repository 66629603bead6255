// OpNumbering's descriptions: reused around the number while ops repeat (op_numbering.h),
// so each test changes one thing the description shows and checks it is shown.
#include "api/ops/op_numbering.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "api/tensor.h"

namespace distcomm {
namespace {

const std::string kPrefix = "rank 1/4 group 'world' ";

OpSpec collective(OpType type, const Tensor* t) {
  OpSpec spec;
  spec.type = type;
  spec.tensor = t;
  return spec;
}

TEST(OpNumbering, RepeatedOpsAreDescribedWithTheirOwnNumbers) {
  OpNumbering numbering(kPrefix, std::chrono::seconds(5));
  Tensor t = Tensor::empty({1000});
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(numbering.next(collective(OpType::kAllReduce, &t)).description,
              kPrefix + "all_reduce #" + std::to_string(i) + " (float32[1000] on cpu)");
  }
}

TEST(OpNumbering, EachChangeOfOpOrTensorShowsInTheNextDescription) {
  OpNumbering numbering(kPrefix, std::chrono::seconds(5));
  Tensor a = Tensor::empty({4});
  Tensor b = Tensor::empty({2, 2});                 // same count, other shape
  Tensor c = Tensor::empty({2, 2}, DType::kFloat64);  // same shape, other dtype
  EXPECT_EQ(numbering.next(collective(OpType::kAllReduce, &a)).description,
            kPrefix + "all_reduce #0 (float32[4] on cpu)");
  EXPECT_EQ(numbering.next(collective(OpType::kAllReduce, &b)).description,
            kPrefix + "all_reduce #1 (float32[2, 2] on cpu)");
  EXPECT_EQ(numbering.next(collective(OpType::kAllReduce, &c)).description,
            kPrefix + "all_reduce #2 (float64[2, 2] on cpu)");
  EXPECT_EQ(numbering.next(collective(OpType::kBroadcast, &c)).description,
            kPrefix + "broadcast #3 (float64[2, 2] on cpu)");
  EXPECT_EQ(numbering.next(collective(OpType::kBarrier, nullptr)).description, kPrefix + "barrier #4");
  OpSpec suffixed = collective(OpType::kBarrier, nullptr);
  suffixed.description_suffix = " in 3 tensors";
  EXPECT_EQ(numbering.next(suffixed).description, kPrefix + "barrier #5 in 3 tensors");
  EXPECT_EQ(numbering.next(collective(OpType::kBarrier, nullptr)).description, kPrefix + "barrier #6");
  OpSpec send = collective(OpType::kSend, &a);
  send.kind = OpKind::kPointToPoint;
  send.root = 2;
  EXPECT_EQ(numbering.next(send).description, kPrefix + "send p2p#0 (float32[4] on cpu)");
  EXPECT_EQ(numbering.next(collective(OpType::kAllReduce, &a)).description,
            kPrefix + "all_reduce #7 (float32[4] on cpu)");
  // A tensor reshaped in place between two ops is the same object with another shape.
  a = a.reshape({1, 4});
  EXPECT_EQ(numbering.next(collective(OpType::kAllReduce, &a)).description,
            kPrefix + "all_reduce #8 (float32[1, 4] on cpu)");
}

TEST(OpNumbering, OpsIssuedFromSeveralThreadsAtOnceAreEachDescribedRight) {
  OpNumbering numbering(kPrefix, std::chrono::seconds(5));
  constexpr int kThreads = 4, kOps = 2000;
  std::vector<std::vector<std::string>> wrong(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      Tensor t = Tensor::empty({i + 1});  // each thread its own shape
      const std::string tail = " (float32[" + std::to_string(i + 1) + "] on cpu)";
      for (int k = 0; k < kOps; ++k) {
        const OpContext ctx = numbering.next(collective(OpType::kAllReduce, &t));
        const std::string expected = kPrefix + "all_reduce #" + std::to_string(ctx.seq) + tail;
        if (ctx.description != expected && wrong[i].size() < 3) wrong[i].push_back(ctx.description);
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) EXPECT_TRUE(wrong[i].empty()) << "thread " << i << ": " << wrong[i][0];
  EXPECT_EQ(numbering.next_seq(), static_cast<uint64_t>(kThreads * kOps));
}

// Point-to-point ordinals (op_numbering.h): a program that uses a new tag for every message
// must not grow the numbering without bound, and a pair of ranks that see the same
// sequence of tags must still number each transfer alike.

TEST(OpNumberingOrdinals, ANewTagForEveryMessageKeepsTheCountsBounded) {
  OpNumbering numbering(kPrefix, std::chrono::seconds(5));
  constexpr int kTags = 200000;
  for (int tag = 0; tag < kTags; ++tag) {
    for (int peer : {0, 2}) {
      ASSERT_EQ(numbering.next_ordinal(/*is_send=*/true, peer, tag), 0) << "tag " << tag;
      ASSERT_EQ(numbering.next_ordinal(/*is_send=*/false, peer, tag), 0) << "tag " << tag;
    }
  }
  // Two peers, both directions: four sequences of tags, each keeping its recent ones.
  EXPECT_LE(numbering.ordinal_keys(), 4 * OpNumbering::kTagsPerPeer);
}

TEST(OpNumberingOrdinals, ATagInUseKeepsCountingAmongNewOnes) {
  OpNumbering numbering(kPrefix, std::chrono::seconds(5));
  // Tag 7 every tenth message, a new tag in between: 7 stays among the recent ones.
  for (int i = 0; i < 20000; ++i) {
    if (i % 10 == 0) {
      ASSERT_EQ(numbering.next_ordinal(true, 1, 7), i / 10);
    } else {
      ASSERT_EQ(numbering.next_ordinal(true, 1, 1000 + i), 0);
    }
  }
  EXPECT_LE(numbering.ordinal_keys(), OpNumbering::kTagsPerPeer);
}

TEST(OpNumberingOrdinals, SenderAndReceiverNumberEachTransferAlikeAfterTagsAreDropped) {
  OpNumbering sender(kPrefix, std::chrono::seconds(5));
  OpNumbering receiver(kPrefix, std::chrono::seconds(5));
  // Tags cycle over more than the numbering keeps, some reused soon, some after long: the
  // receiver posts its recvs in the order of the sends, so both drop the same tags.
  uint32_t x = 12345;
  for (int i = 0; i < 50000; ++i) {
    x = x * 1103515245u + 12345u;
    const int tag = static_cast<int>((x >> 8) % (3 * OpNumbering::kTagsPerPeer));
    uint64_t sent_epoch = 0, received_epoch = 0;
    const int64_t sent = sender.next_ordinal(true, /*peer=*/1, tag, &sent_epoch);
    const int64_t received = receiver.next_ordinal(false, /*peer=*/0, tag, &received_epoch);
    ASSERT_EQ(sent, received) << "message " << i << " tag " << tag;
    // Alike too, so the stall watch compares their ordinals (p2p_verdict.h).
    ASSERT_EQ(sent_epoch, received_epoch) << "message " << i << " tag " << tag;
    // Traffic with another peer must not change what this pair drops.
    sender.next_ordinal(true, /*peer=*/2, 100000 + i);
  }
  EXPECT_LE(sender.ordinal_keys(), 2 * OpNumbering::kTagsPerPeer);
}

TEST(OpNumberingOrdinals, ACountRestartedAfterOtherDropsHasAnotherEpoch) {
  // Side a drops tag 0 (257 other tags since its use) and restarts its count; side b used tag
  // 0 again halfway and keeps counting: the numbers differ, and so do the epochs.
  OpNumbering a(kPrefix, std::chrono::seconds(5)), b(kPrefix, std::chrono::seconds(5));
  const int others = static_cast<int>(OpNumbering::kTagsPerPeer) + 1;
  uint64_t epoch_a = 1, epoch_b = 1;
  a.next_ordinal(true, 1, 0, &epoch_a);
  b.next_ordinal(false, 0, 0, &epoch_b);
  EXPECT_EQ(epoch_a, 0u);  // nothing dropped yet
  EXPECT_EQ(epoch_b, 0u);
  for (int k = 1; k <= others; ++k) a.next_ordinal(true, 1, k);
  for (int k = 1; k <= others; ++k) {
    if (k == others / 2) b.next_ordinal(false, 0, 0);
    b.next_ordinal(false, 0, k);
  }
  EXPECT_EQ(a.next_ordinal(true, 1, 0, &epoch_a), 0);  // restarted
  EXPECT_EQ(b.next_ordinal(false, 0, 0, &epoch_b), 2);
  EXPECT_NE(epoch_a, 0u);
  EXPECT_NE(epoch_a, epoch_b);
}

TEST(OpNumberingOrdinals, DetailKeepsEveryTagsCount) {
  OpNumbering numbering(kPrefix, std::chrono::seconds(5));
  numbering.keep_every_ordinal();
  const int tags = static_cast<int>(4 * OpNumbering::kTagsPerPeer);
  for (int tag = 0; tag < tags; ++tag) EXPECT_EQ(numbering.next_ordinal(true, 1, tag), 0);
  // DETAIL's store key names the transfer exactly: the first tag is still at its second.
  EXPECT_EQ(numbering.next_ordinal(true, 1, 0), 1);
  EXPECT_EQ(numbering.ordinal_keys(), static_cast<size_t>(tags));
}

TEST(OpNumberingOrdinals, AFingerprintCarriesTheTransfersOrdinal) {
  OpNumbering numbering(kPrefix, std::chrono::seconds(5));
  Tensor t = Tensor::empty({4});
  OpSpec send = collective(OpType::kSend, &t);
  send.kind = OpKind::kPointToPoint;
  send.root = 2;
  send.tag = 5;
  EXPECT_EQ(numbering.next(send).fingerprint.ordinal, 0);
  EXPECT_EQ(numbering.next(send).fingerprint.ordinal, 1);
  OpSpec any = collective(OpType::kRecv, &t);
  any.kind = OpKind::kPointToPoint;
  any.root = -1;  // from any rank: numbered once its source is known (DetailChecks)
  any.tag = 5;
  EXPECT_EQ(numbering.next(any).fingerprint.ordinal, -1);
}

// The epoch of a transfer comes back beside its context, not in its fingerprint (whose layout
// is the plugins': plugin.h), and matches next_ordinal's.
TEST(OpNumberingOrdinals, NextGivesTheTransfersEpochBesideItsContext) {
  OpNumbering numbering(kPrefix, std::chrono::seconds(5));
  OpNumbering twin(kPrefix, std::chrono::seconds(5));
  Tensor t = Tensor::empty({4});
  OpSpec send = collective(OpType::kSend, &t);
  send.kind = OpKind::kPointToPoint;
  send.root = 1;
  uint64_t epoch = 1;
  for (int tag = 0; tag <= static_cast<int>(OpNumbering::kTagsPerPeer); ++tag) {  // one drop: tag 0's
    send.tag = tag;
    numbering.next(send, &epoch);
    twin.next_ordinal(true, 1, tag);
  }
  EXPECT_EQ(epoch, 0u) << "a count begun before any drop";
  send.tag = 0;
  const OpContext ctx = numbering.next(send, &epoch);
  uint64_t expected = 0;
  EXPECT_EQ(ctx.fingerprint.ordinal, twin.next_ordinal(true, 1, 0, &expected));
  EXPECT_NE(epoch, 0u);
  EXPECT_EQ(epoch, expected);
  OpSpec all_reduce = collective(OpType::kAllReduce, &t);
  numbering.next(all_reduce, &epoch);
  EXPECT_EQ(epoch, 0u) << "not a transfer";
}

}  // namespace
}  // namespace distcomm
