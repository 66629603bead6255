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

}  // namespace
}  // namespace distcomm
