// The gloo plugin's all_reduce algorithm names (read by GlooConfig) and auto rule
// (backends/gloo/gloo_all_reduce.h).
#include "backends/gloo/gloo_all_reduce.h"

#include <gtest/gtest.h>

#include "api/errors.h"
#include "backends/gloo/gloo_config.h"

namespace distcomm {
namespace gloo {
namespace {

constexpr size_t kFloat = 4;

AllReduceAlgorithm automatic(size_t count, size_t element_bytes, int group_size) {
  return resolve_all_reduce_algorithm(AllReduceAlgorithm::kAuto, count, element_bytes, group_size);
}

AllReduceAlgorithm configured(const std::string& name) { return GlooConfig::parse({{"algorithm", name}}).algorithm; }

TEST(GlooAllReduceChoice, NamesRoundTripAndEmptyIsAuto) {
  for (auto a : {AllReduceAlgorithm::kAuto, AllReduceAlgorithm::kRing, AllReduceAlgorithm::kRingChunked,
                 AllReduceAlgorithm::kHalvingDoubling, AllReduceAlgorithm::kBcube}) {
    EXPECT_EQ(configured(all_reduce_algorithm_name(a)), a);
  }
  EXPECT_EQ(configured(""), AllReduceAlgorithm::kAuto);
  EXPECT_EQ(GlooConfig::parse({}).algorithm, AllReduceAlgorithm::kAuto);
  EXPECT_THROW(configured("Ring"), InvalidArgument);
}

TEST(GlooAllReduceChoice, AutoTakesTheRingBelowTwoElementsPerRank) {
  // 8 B of float32 on 2 ranks: 2 elements, fewer than the ring's 4 segments.
  EXPECT_EQ(automatic(1, kFloat, 2), AllReduceAlgorithm::kRing);
  EXPECT_EQ(automatic(3, kFloat, 2), AllReduceAlgorithm::kRing);
  EXPECT_EQ(automatic(4, kFloat, 2), AllReduceAlgorithm::kBcube);
  EXPECT_EQ(automatic(7, kFloat, 4), AllReduceAlgorithm::kRing);
  EXPECT_EQ(automatic(8, kFloat, 4), AllReduceAlgorithm::kBcube);
  // Counted in elements, not bytes: 8 bytes of int8 are 8 elements.
  EXPECT_EQ(automatic(8, 1, 2), AllReduceAlgorithm::kBcube);
}

TEST(GlooAllReduceChoice, AutoTakesBcubeUpToTheLimitAndTheRingAbove) {
  // 2 ranks: up to 512 KiB.
  EXPECT_EQ(automatic((512 << 10) / kFloat, kFloat, 2), AllReduceAlgorithm::kBcube);
  EXPECT_EQ(automatic((512 << 10) / kFloat + 1, kFloat, 2), AllReduceAlgorithm::kRing);
  EXPECT_EQ(automatic((1 << 20) / kFloat, kFloat, 2), AllReduceAlgorithm::kRing);
  // More ranks: up to 1 MiB.
  for (int ranks : {3, 4, 16}) {
    EXPECT_EQ(automatic((1 << 20) / kFloat, kFloat, ranks), AllReduceAlgorithm::kBcube) << ranks;
    EXPECT_EQ(automatic((1 << 20) / kFloat + 1, kFloat, ranks), AllReduceAlgorithm::kRing) << ranks;
  }
  EXPECT_EQ(automatic((1 << 20) / 8 + 1, 8, 16), AllReduceAlgorithm::kRing);
}

TEST(GlooAllReduceChoice, AnExplicitChoiceIsKept) {
  for (auto a : {AllReduceAlgorithm::kRing, AllReduceAlgorithm::kRingChunked, AllReduceAlgorithm::kHalvingDoubling,
                 AllReduceAlgorithm::kBcube}) {
    EXPECT_EQ(resolve_all_reduce_algorithm(a, 1, kFloat, 4), a);
    EXPECT_EQ(resolve_all_reduce_algorithm(a, 1 << 20, kFloat, 4), a);
  }
}

}  // namespace
}  // namespace gloo
}  // namespace distcomm
