#include <gtest/gtest.h>

#include "api/errors.h"
#include "api/tensor.h"

namespace distcomm {
namespace {

TEST(Tensor, EmptyOwnsAlignedMemory) {
  Tensor t = Tensor::empty({2, 3}, DType::kFloat64);
  EXPECT_TRUE(t.defined());
  EXPECT_TRUE(t.owns_memory());
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.nbytes(), 48u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % 64, 0u);
  EXPECT_EQ(t.describe(), "float64[2, 3] on cpu");
}

TEST(Tensor, CopiesShareStorageAndCloneDoesNot) {
  Tensor a = Tensor::of<int32_t>({1, 2, 3});
  Tensor b = a;
  b.set_item(0, 10);
  EXPECT_EQ(a.item(0), 10);
  Tensor c = a.clone();
  c.set_item(1, 20);
  EXPECT_EQ(a.item(1), 2);
}

TEST(Tensor, FromBlobIsAViewOfUserMemory) {
  float buf[4] = {1, 2, 3, 4};
  Tensor t = Tensor::from_blob(buf, {4}, DType::kFloat32);
  EXPECT_FALSE(t.owns_memory());
  t.fill(7);
  EXPECT_EQ(buf[3], 7.0f);
  Tensor cuda = Tensor::from_blob(buf, {4}, DType::kFloat32, Device::cuda(1));
  EXPECT_EQ(cuda.device().str(), "cuda:1");
  EXPECT_THROW(cuda.clone(), InvalidArgument);  // host-only helpers refuse device memory
}

TEST(Tensor, FromBlobWithAnOwnerKeepsItAlive) {
  auto owner = std::make_shared<std::vector<float>>(std::vector<float>{1, 2, 3, 4});
  std::weak_ptr<std::vector<float>> watch = owner;
  Tensor slice;
  {
    Tensor t = Tensor::from_blob(owner->data(), {4}, DType::kFloat32, Device::cpu(), owner);
    owner.reset();
    EXPECT_TRUE(t.owns_memory());
    slice = t.flat_slice(2, 2);  // views hold the owner too
  }
  ASSERT_FALSE(watch.expired());
  EXPECT_EQ(slice.to_doubles(), (std::vector<double>{3, 4}));
  slice = Tensor();
  EXPECT_TRUE(watch.expired());
}

TEST(Tensor, FlatSliceAndReshapeShareMemory) {
  Tensor t = Tensor::of<int64_t>({0, 1, 2, 3, 4, 5});
  Tensor s = t.flat_slice(2, 3);
  EXPECT_EQ(s.to_doubles(), (std::vector<double>{2, 3, 4}));
  s.fill(9);
  EXPECT_EQ(t.item(4), 9);
  EXPECT_EQ(t.reshape({2, 3}).shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_THROW(t.reshape({4}), InvalidArgument);
  EXPECT_THROW(t.flat_slice(5, 2), InvalidArgument);
}

TEST(Tensor, SixteenBitFloatsRoundTripValues) {
  Tensor h = Tensor::empty({3}, DType::kFloat16);
  h.set_item(0, 1.5);
  h.set_item(1, -2048);
  h.set_item(2, 0.1);
  EXPECT_EQ(h.item(0), 1.5);
  EXPECT_EQ(h.item(1), -2048);
  EXPECT_NEAR(h.item(2), 0.1, 1e-4);
  Tensor b = Tensor::empty({1}, DType::kBFloat16);
  b.set_item(0, 3.0);
  EXPECT_EQ(b.item(0), 3.0);
}

TEST(Tensor, BadInputIsRefused) {
  EXPECT_THROW(Tensor::empty({-1}), InvalidArgument);
  EXPECT_THROW(Tensor::empty({2}, DType::kFloat32, Device::cuda(0)), InvalidArgument);
  EXPECT_THROW(Tensor::of<float>({1}).data_as<int32_t>(), InvalidArgument);
  Tensor a = Tensor::empty({2});
  EXPECT_THROW(a.copy_from(Tensor::empty({3})), InvalidArgument);
  EXPECT_THROW(Device::parse("cuda:x"), InvalidArgument);
  EXPECT_EQ(Device::parse("cuda:3").index, 3);
}

TEST(Tensor, ZeroElements) {
  Tensor t = Tensor::empty({0, 5});
  EXPECT_EQ(t.numel(), 0);
  EXPECT_EQ(t.nbytes(), 0u);
  EXPECT_EQ(t.clone().numel(), 0);
}

}  // namespace
}  // namespace distcomm

namespace distcomm {
namespace {

// Cache lines for every tensor; whole pages for large ones (a buffer at page offset 64 made
// the kernel's socket copies up to 2.8x slower: see Tensor::empty).
TEST(TensorMemory, LargeTensorsStartOnAPageSmallOnesOnACacheLine) {
  for (int64_t n : {1, 7, 1000}) {
    Tensor t = Tensor::empty({n}, DType::kFloat32);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % 64, 0u) << n;
  }
  for (int64_t bytes : {int64_t{64} << 10, int64_t{1} << 20, int64_t{64} << 20}) {
    Tensor t = Tensor::zeros({bytes}, DType::kUInt8);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % 4096, 0u) << bytes;
  }
}

// More memory than the host has: a std::bad_alloc still, now saying how much and for what.
TEST(Tensor, AnAllocationTheHostCannotGiveSaysHowMuch) {
  try {
    Tensor::empty({int64_t{1} << 60}, DType::kFloat32);
    ADD_FAILURE() << "4 EiB were allocated";
  } catch (const std::bad_alloc& e) {
    EXPECT_EQ(std::string(e.what()),
              "cannot allocate 4611686018427387904 bytes of host memory for float32[1152921504606846976] on cpu");
  }
}

}  // namespace
}  // namespace distcomm
