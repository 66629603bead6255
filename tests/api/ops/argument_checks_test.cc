// ArgumentChecks::split_counts: all_to_all_single's split sizes, checked before anything
// reaches a backend. Each split must lie in [0, dim 0] and their sum must be dim 0 without
// overflowing ({2^62 + 1} x 4 once wrapped to 4 and went to gloo, shm and mpi).
#include "api/ops/argument_checks.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "api/errors.h"
#include "api/tensor.h"

namespace distcomm {
namespace {

const ArgumentChecks kChecks(1, 4, "rank 1/4 group 'world' ");

std::string refusal(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(SplitCounts, ValidSplitsGiveElementCounts) {
  const Tensor t = Tensor::empty({6, 3});
  EXPECT_EQ(kChecks.split_counts(OpType::kAllToAll, t, {1, 0, 2, 3}, "input"), (std::vector<int64_t>{3, 0, 6, 9}));
  EXPECT_EQ(kChecks.split_counts(OpType::kAllToAll, t, {0, 0, 6, 0}, "input"), (std::vector<int64_t>{0, 0, 18, 0}));
  const Tensor even = Tensor::empty({8});
  EXPECT_EQ(kChecks.split_counts(OpType::kAllToAll, even, {}, "output"), (std::vector<int64_t>{2, 2, 2, 2}));
}

TEST(SplitCounts, SplitsWhoseSumOverflowsAreRefused) {
  const Tensor t = Tensor::empty({4});
  const int64_t evil = (int64_t{1} << 62) + 1;  // x4 wraps to 4
  const std::string wrapped = refusal([&] { kChecks.split_counts(OpType::kAllToAll, t, {evil, evil, evil, evil}, "input"); });
  EXPECT_NE(wrapped.find("rank 1/4 group 'world' all_to_all: input_split_sizes[0] is 4611686018427387905 rows but "
                         "'input' has 4 (its dim 0)"),
            std::string::npos)
      << wrapped;
  // Each split within dim 0, the sum past it (and past int64 for larger dims).
  const std::string past = refusal([&] { kChecks.split_counts(OpType::kAllToAll, t, {3, 0, 2, 0}, "output"); });
  EXPECT_NE(past.find("output split sizes add up to more than the tensor's 4 rows at output_split_sizes[2]"),
            std::string::npos)
      << past;
  const int64_t max = INT64_MAX;
  const std::string big = refusal([&] { kChecks.split_counts(OpType::kAllToAll, t, {max, max, 2, 4}, "output"); });
  EXPECT_NE(big.find("output_split_sizes[0] is 9223372036854775807 rows"), std::string::npos) << big;
  // The refusals there were before.
  const std::string negative = refusal([&] { kChecks.split_counts(OpType::kAllToAll, t, {-1, 5, 0, 0}, "input"); });
  EXPECT_NE(negative.find("input_split_sizes[0] is -1, a negative number of rows"), std::string::npos) << negative;
  const std::string short_sum = refusal([&] { kChecks.split_counts(OpType::kAllToAll, t, {1, 1, 1, 0}, "input"); });
  EXPECT_NE(short_sum.find("input split sizes add up to 3 rows but the tensor has 4"), std::string::npos) << short_sum;
  EXPECT_NE(refusal([&] { kChecks.split_counts(OpType::kAllToAll, t, {4}, "input"); }).find("has 1 entries, expected 4"),
            std::string::npos);
  EXPECT_NE(refusal([&] { kChecks.split_counts(OpType::kAllToAll, Tensor::empty({5}), {}, "input"); })
                .find("not divisible by the group size 4"),
            std::string::npos);
}

}  // namespace
}  // namespace distcomm
