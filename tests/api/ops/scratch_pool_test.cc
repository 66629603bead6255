// The scratch pool behind the list forms' packed copies (api/ops/scratch_pool.h): a buffer
// is reused once the last tensor over it has gone, never while an op still holds it, and
// the pool keeps only a few.
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
      std::vector<Tensor> outputs;
      if (pg.rank() == 0) {
        for (int r = 0; r < pg.size(); ++r) outputs.push_back(Tensor::zeros({256}));
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

}  // namespace
}  // namespace distcomm
