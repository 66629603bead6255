// Bucket assignment without processes: order, caps, the small first bucket, dtype streams.
#include "ddp/bucket_assignment.h"

#include <gtest/gtest.h>

#include "api/errors.h"

namespace distcomm {
namespace ddp {
namespace {

std::vector<GradientSpec> float_grads(const std::vector<int64_t>& numels) {
  std::vector<GradientSpec> specs;
  for (int64_t n : numels) specs.push_back({n, DType::kFloat32, Device::cpu()});
  return specs;
}

std::vector<std::vector<size_t>> members(const std::vector<BucketSpec>& buckets) {
  std::vector<std::vector<size_t>> out;
  for (const BucketSpec& b : buckets) out.push_back(b.gradients);
  return out;
}

TEST(BucketAssignment, ReverseOrderIsTheBackwardOrder) {
  EXPECT_EQ(reverse_order(4), (std::vector<size_t>{3, 2, 1, 0}));
  EXPECT_TRUE(reverse_order(0).empty());
}

TEST(BucketAssignment, CapsGroupGradientsAndTheFirstBucketIsSmaller) {
  // 100 floats = 400 bytes each. First bucket closes at >= 400 B, later ones at >= 1000 B.
  const auto specs = float_grads({100, 100, 100, 100, 100, 100});
  const auto buckets = assign_buckets(specs, reverse_order(6), {400, 1000});
  EXPECT_EQ(members(buckets), (std::vector<std::vector<size_t>>{{5}, {4, 3, 2}, {1, 0}}));
  EXPECT_EQ(buckets[1].offsets, (std::vector<int64_t>{0, 100, 200}));
  EXPECT_EQ(buckets[1].numel, 300);
  EXPECT_EQ(buckets[1].nbytes(), 1200u);
  EXPECT_EQ(buckets[2].nbytes(), 800u);  // the remainder, below the cap
}

TEST(BucketAssignment, CapZeroGivesOneBucketPerGradient) {
  const auto buckets = assign_buckets(float_grads({3, 1, 4, 1, 5}), reverse_order(5), {1u << 20, 0});
  EXPECT_EQ(members(buckets), (std::vector<std::vector<size_t>>{{4}, {3}, {2}, {1}, {0}}));
}

TEST(BucketAssignment, HugeCapsGiveOneBucket) {
  const auto buckets = assign_buckets(float_grads({10, 20, 30}), reverse_order(3), {1u << 30, 1u << 30});
  ASSERT_EQ(buckets.size(), 1u);
  EXPECT_EQ(buckets[0].gradients, (std::vector<size_t>{2, 1, 0}));
  EXPECT_EQ(buckets[0].offsets, (std::vector<int64_t>{0, 30, 50}));
}

TEST(BucketAssignment, FirstCapNeverExceedsTheCap) {
  // A first cap of 1 MiB with a cap of 8 bytes: the first bucket is capped at 8 bytes too.
  const auto buckets = assign_buckets(float_grads({2, 2, 2}), reverse_order(3), {1u << 20, 8});
  EXPECT_EQ(buckets.size(), 3u);
}

TEST(BucketAssignment, FollowsTheGivenOrder) {
  const auto buckets = assign_buckets(float_grads({100, 100, 100, 100}), {0, 2, 1, 3}, {800, 800});
  EXPECT_EQ(members(buckets), (std::vector<std::vector<size_t>>{{0, 2}, {1, 3}}));
}

TEST(BucketAssignment, DTypesGoToSeparateBucketsOrderedByWhenTheyFill) {
  std::vector<GradientSpec> specs = {
      {100, DType::kFloat32, Device::cpu()},  // 0: 400 B
      {100, DType::kFloat64, Device::cpu()},  // 1: 800 B
      {100, DType::kFloat32, Device::cpu()},  // 2
      {100, DType::kFloat64, Device::cpu()},  // 3
      {100, DType::kFloat32, Device::cpu()},  // 4
  };
  // Order 4,3,2,1,0; caps 800 B: float32 fills {4,2} at position 2; float64 fills {3} at
  // position 1, then {1} at position 3; float32 {0} is left open, position 4.
  const auto buckets = assign_buckets(specs, reverse_order(5), {800, 800});
  EXPECT_EQ(members(buckets), (std::vector<std::vector<size_t>>{{3}, {4, 2}, {1}, {0}}));
  EXPECT_EQ(buckets[0].dtype, DType::kFloat64);
  EXPECT_EQ(buckets[1].dtype, DType::kFloat32);
}

TEST(BucketAssignment, DevicesGoToSeparateBuckets) {
  std::vector<GradientSpec> specs = {{4, DType::kFloat32, Device::cpu()}, {4, DType::kFloat32, Device::cuda(0)}};
  const auto buckets = assign_buckets(specs, reverse_order(2), {1u << 20, 1u << 20});
  ASSERT_EQ(buckets.size(), 2u);
  EXPECT_NE(buckets[0].device, buckets[1].device);
}

TEST(BucketAssignment, EmptyGradientsAreAllowed) {
  EXPECT_TRUE(assign_buckets({}, {}, {}).empty());
  const auto buckets = assign_buckets(float_grads({0, 5}), reverse_order(2), {1u << 20, 1u << 20});
  ASSERT_EQ(buckets.size(), 1u);
  EXPECT_EQ(buckets[0].numel, 5);
}

TEST(BucketAssignment, RejectsAnOrderThatIsNotAPermutation) {
  const auto specs = float_grads({1, 1, 1});
  EXPECT_THROW(assign_buckets(specs, {0, 1}, {}), InvalidArgument);
  EXPECT_THROW(assign_buckets(specs, {0, 1, 1}, {}), InvalidArgument);
  try {
    assign_buckets(specs, {0, 1, 7}, {});
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("index 7 is out of range"), std::string::npos) << e.what();
  }
}

TEST(BucketAssignment, MebibytesToBytes) {
  EXPECT_EQ(mebibytes_to_bytes(25, "bucket_cap_mb"), 25u << 20);
  EXPECT_EQ(mebibytes_to_bytes(0.001, "bucket_cap_mb"), 1049u);
  EXPECT_EQ(mebibytes_to_bytes(0, "bucket_cap_mb"), 0u);
  try {
    mebibytes_to_bytes(-1, "bucket_cap_mb");
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("bucket_cap_mb"), std::string::npos) << e.what();
  }
}

TEST(BucketAssignment, Describe) {
  const auto buckets = assign_buckets(float_grads({262144, 1}), reverse_order(2), {4, 1u << 30});
  EXPECT_EQ(describe_buckets(buckets), "2 buckets: 4 B (1 grad), 1.00 MiB (1 grad)");
}

}  // namespace
}  // namespace ddp
}  // namespace distcomm
