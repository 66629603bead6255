#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>

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

// Shapes whose numel, or whose bytes, do not fit in int64_t are refused naming the sizes
// (a wrapped product made {2^32, 2^32} a tensor of 0 elements and {2^61} of float64 one of
// 0 bytes, which set_item then wrote past).
TEST(Tensor, ShapesWhoseSizeOverflowsAreRefused) {
  auto refusal = [](const std::function<void()>& fn) {
    try {
      fn();
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  const int64_t two32 = int64_t{1} << 32, two61 = int64_t{1} << 61, two62 = int64_t{1} << 62;
  EXPECT_NE(refusal([&] { Tensor::empty({two32, two32}); })
                .find("Storage size calculation overflowed with sizes=[4294967296, 4294967296]"),
            std::string::npos);
  EXPECT_NE(refusal([&] { Tensor::empty({two62, 4}, DType::kUInt8); }).find("sizes=[4611686018427387904, 4]"),
            std::string::npos);
  // numel fits, bytes do not.
  EXPECT_NE(refusal([&] { Tensor::empty({two61}, DType::kFloat64); })
                .find("sizes=[2305843009213693952] and dtype float64 (8 bytes an element)"),
            std::string::npos);
  EXPECT_NE(refusal([&] { Tensor::zeros({two61, 8}, DType::kUInt8); }).find("overflowed"), std::string::npos);
  int64_t word = 0;
  EXPECT_NE(refusal([&] { Tensor::from_blob(&word, {two32, two32}, DType::kUInt8); }).find("overflowed"),
            std::string::npos);
  EXPECT_NE(refusal([&] { Tensor::from_blob(&word, {two62}, DType::kInt32, Device::cuda(0)); }).find("overflowed"),
            std::string::npos);
  EXPECT_NE(refusal([&] { Tensor::from_blob(&word, {1, -2}, DType::kUInt8); }).find("negative size in dimension 1"),
            std::string::npos);
  Tensor t = Tensor::empty({4}, DType::kFloat64);
  EXPECT_NE(refusal([&] { t.reshape({two32, two32, 0, -1}); }).find("negative"), std::string::npos);
  EXPECT_NE(refusal([&] { t.reshape({two62, 4}); }).find("overflowed"), std::string::npos);
  // A zero anywhere is an empty tensor, however large the other sizes.
  EXPECT_EQ(Tensor::empty({two62, two62, 0}).numel(), 0);
  EXPECT_EQ(Tensor::empty({two62, two62, 0}).nbytes(), 0u);
  // The largest that fits is not refused for its size (the host cannot give it).
  EXPECT_THROW(Tensor::empty({INT64_MAX / 8}, DType::kFloat64), TensorAllocationError);
}

// flat_slice's bounds are checked without overflow: offset + count once wrapped past them.
TEST(Tensor, FlatSliceBoundsDoNotOverflow) {
  Tensor t = Tensor::zeros({10}, DType::kFloat32);
  const int64_t two62 = int64_t{1} << 62;
  EXPECT_THROW(t.flat_slice(two62, two62), InvalidArgument);
  EXPECT_THROW(t.flat_slice(INT64_MAX, 1), InvalidArgument);
  EXPECT_THROW(t.flat_slice(1, INT64_MAX), InvalidArgument);
  EXPECT_THROW(t.flat_slice(11, 0), InvalidArgument);
  EXPECT_THROW(t.flat_slice(8, 5), InvalidArgument);
  EXPECT_EQ(t.flat_slice(10, 0).numel(), 0);
  EXPECT_EQ(t.flat_slice(0, 10).numel(), 10);
  EXPECT_THROW(t.set_item(INT64_MAX, 1), InvalidArgument);
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
