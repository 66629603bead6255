// The scratch pool behind the list forms' packed copies (api/ops/scratch_pool.h): a buffer
// is reused once the last tensor over it has gone, never while an op still holds it, and
// the pool keeps only a few; above 256 MiB it keeps the 2 most recently returned while takes
// use them.
#include <gtest/gtest.h>

#include <vector>

#include "api/ops/scratch_pool.h"
#include "tests/testing/in_process_group.h"

namespace distcomm {
namespace {

TEST(ScratchPool, ABufferIsReusedOnlyOnceItsLastTensorHasGone) {
  void* first = nullptr;
  {
    Tensor t = pooled_tensor(1000, DType::kFloat32);
    first = t.data();
    Tensor view = t.flat_slice(10, 20);  // a view holds the buffer too
    t = Tensor();
    Tensor meanwhile = pooled_tensor(1000, DType::kFloat32);
    EXPECT_NE(meanwhile.data(), first) << "taken again while a view of it lives";
  }
  // Both went back; the one that fits best (either) comes out again.
  Tensor again = pooled_tensor(1000, DType::kFloat32);
  EXPECT_EQ(again.numel(), 1000);
  EXPECT_EQ(again.dtype(), DType::kFloat32);
  const ScratchPoolUse use = scratch_pool_use();
  EXPECT_GE(use.free_buffers, 1u);
  Tensor smaller = pooled_tensor(10, DType::kInt64);  // a larger buffer serves a smaller op
  EXPECT_EQ(smaller.nbytes(), 80u);
}

TEST(ScratchPool, KeepsAFewBuffers) {
  {
    std::vector<Tensor> many;
    for (int i = 0; i < 10; ++i) many.push_back(pooled_tensor(1 << 16, DType::kUInt8));
  }
  EXPECT_LE(scratch_pool_use().free_buffers, 4u);
}

// A list gather packs into the pool, and the buffer is back once the op (and the copy into
// the caller's tensors) has ended: the next gather reuses it rather than touching new pages.
TEST(ScratchPool, AListGatherReturnsItsBuffer) {
  auto groups = testing::in_process_world(3);
  const ScratchPoolUse before = scratch_pool_use();
  testing::on_every_rank(groups, [](ProcessGroup& pg) {
    Tensor input = Tensor::zeros({256});
    input.fill(static_cast<float>(pg.rank()));
    for (int round = 0; round < 3; ++round) {
      // Views of one buffer a float apart: never end to end, which a gather would use in place
      // without packing (separate tensors may lie end to end: TSan's allocator puts them so).
      std::vector<Tensor> outputs;
      Tensor apart = Tensor::zeros({257 * pg.size()});
      if (pg.rank() == 0) {
        for (int r = 0; r < pg.size(); ++r) outputs.push_back(apart.flat_slice(257 * r, 256));
      }
      GatherOptions o;
      o.root = 0;
      pg.gather(outputs, input, o)->wait();
      for (size_t r = 0; r < outputs.size(); ++r) EXPECT_EQ(outputs[r].data_as<float>()[255], static_cast<float>(r));
    }
  });
  const ScratchPoolUse after = scratch_pool_use();
  EXPECT_EQ(after.taken - before.taken, 3u) << "the root's three gathers pack into the pool";
  EXPECT_LE(after.allocated - before.allocated, 1u) << "the gather's packed buffer did not come back";
  // Every buffer taken came back: the pool holds what it held before, plus any it allocated
  // (each gather takes one of its buffers and returns it before the next).
  EXPECT_EQ(after.free_buffers, before.free_buffers + (after.allocated - before.allocated))
      << "a gather kept its buffer";
}

// Above the pool's 256 MiB (scratch_pool.cc: kMaxFreeBytes). Takes never touch the memory,
// so these tests cost address space, not RAM.
constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kLarge = 300 * kMiB;
// Takes in a row without a large one before it goes (scratch_pool.cc: kLargeIdleTakes).
constexpr int kIdleTakes = 8;

// Small takes until no large one is left from an earlier test (each goes after kIdleTakes).
void forget_large_ones() {
  for (int i = 0; i < kIdleTakes; ++i) pooled_tensor(64, DType::kUInt8);
  ASSERT_EQ(scratch_pool_use().large_buffers, 0u);
}

// A job's list op above 256 MiB allocated (and faulted in) a fresh buffer every call: 2.0 s
// a call against 0.08 s at 128 MiB per rank (helper-214).
TEST(ScratchPool, ARepeatedLargeTakeReusesOneBuffer) {
  forget_large_ones();
  const ScratchPoolUse before = scratch_pool_use();
  void* first = nullptr;
  for (int round = 0; round < 5; ++round) {
    Tensor t = pooled_tensor(kLarge, DType::kUInt8);
    if (round == 0) first = t.data();
    EXPECT_EQ(t.data(), first) << "round " << round;
  }
  const ScratchPoolUse after = scratch_pool_use();
  EXPECT_EQ(after.taken - before.taken, 5u);
  EXPECT_EQ(after.allocated - before.allocated, 1u) << "a large buffer was not kept for the next take";
  EXPECT_EQ(after.large_buffers, 1u);
  EXPECT_EQ(after.large_bytes, static_cast<size_t>(kLarge));
}

// A one-off large op's buffer goes once the job's takes pass it by.
TEST(ScratchPool, ALargeOneGoesAfterTakesWithoutIt) {
  forget_large_ones();
  pooled_tensor(kLarge, DType::kUInt8);
  ASSERT_EQ(scratch_pool_use().large_buffers, 1u);
  for (int i = 1; i < kIdleTakes; ++i) pooled_tensor(1000, DType::kFloat32);
  EXPECT_EQ(scratch_pool_use().large_buffers, 1u) << "gone before " << kIdleTakes << " takes without it";
  pooled_tensor(1000, DType::kFloat32);
  const ScratchPoolUse use = scratch_pool_use();
  EXPECT_EQ(use.large_buffers, 0u) << "kept after " << kIdleTakes << " takes without it";
  EXPECT_EQ(use.large_bytes, 0u);
  // And a take that uses it starts the count again.
  pooled_tensor(kLarge, DType::kUInt8);
  for (int i = 1; i < kIdleTakes; ++i) pooled_tensor(1000, DType::kFloat32);
  pooled_tensor(kLarge, DType::kUInt8);
  for (int i = 1; i < kIdleTakes; ++i) pooled_tensor(1000, DType::kFloat32);
  EXPECT_EQ(scratch_pool_use().large_buffers, 1u) << "a take served by it did not start its count again";
}

// A small op is not served by a large one (it would pin it), one of more than half its size is.
TEST(ScratchPool, OnlyATakeOfMoreThanHalfItsSizeUsesALargeOne) {
  forget_large_ones();
  void* large = pooled_tensor(kLarge, DType::kUInt8).data();
  {
    Tensor small = pooled_tensor(kMiB, DType::kUInt8);
    Tensor half = pooled_tensor(kLarge / 2, DType::kUInt8);
    EXPECT_NE(small.data(), large);
    EXPECT_NE(half.data(), large) << "a take of half its size pins a large one";
    EXPECT_EQ(scratch_pool_use().large_buffers, 1u);
  }
  const ScratchPoolUse before = scratch_pool_use();
  {
    Tensor most = pooled_tensor(kLarge / 2 + 1, DType::kUInt8);
    EXPECT_EQ(most.data(), large);
    EXPECT_EQ(scratch_pool_use().large_buffers, 0u) << "a taken large one still counted as unused";
    Tensor bigger = pooled_tensor(kLarge + 1, DType::kUInt8);  // does not fit it
    EXPECT_NE(bigger.data(), large);
  }
  EXPECT_EQ(scratch_pool_use().allocated - before.allocated, 1u);
}

// Two held at once (all_to_all of lists packs its input and output; two list ops in flight):
// each has its own, and both are kept for the next pair. A third replaces the oldest.
TEST(ScratchPool, TwoLargeOnesInFlightAreBothKept) {
  forget_large_ones();
  void* a = nullptr;
  void* b = nullptr;
  {
    Tensor in = pooled_tensor(kLarge, DType::kUInt8);
    Tensor out = pooled_tensor(kLarge, DType::kUInt8);
    EXPECT_NE(in.data(), out.data());
    a = in.data();
    b = out.data();
  }
  const ScratchPoolUse before = scratch_pool_use();
  EXPECT_EQ(before.large_buffers, 2u);
  for (int round = 0; round < 3; ++round) {
    Tensor in = pooled_tensor(kLarge, DType::kUInt8);
    Tensor out = pooled_tensor(kLarge, DType::kUInt8);
    EXPECT_TRUE((in.data() == a && out.data() == b) || (in.data() == b && out.data() == a)) << "round " << round;
  }
  EXPECT_EQ(scratch_pool_use().allocated, before.allocated) << "a pair in flight allocated again";
  { Tensor third = pooled_tensor(kLarge + kMiB, DType::kUInt8); }  // fits neither: a new one
  const ScratchPoolUse after = scratch_pool_use();
  EXPECT_EQ(after.large_buffers, 2u) << "more large ones kept than 2";
  EXPECT_EQ(after.large_bytes, static_cast<size_t>(2 * kLarge + kMiB));
}

}  // namespace
}  // namespace distcomm
