// DistributedSampler splits a data set as torch.utils.data.DistributedSampler does: shards
// disjoint and equally long, padding from the start or drop_last, a shuffle that is the same
// on every rank and changes with the epoch, batches through the Sampler interface, and an
// epoch shared with the copy a data loader holds. One process: the ranks' shares are
// computed side by side.
#include <gtest/gtest.h>
#include <torch/serialize/archive.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "api/errors.h"
#include "integrations/torch/distributed_sampler.h"

namespace distcomm {
namespace torch {
namespace {

std::vector<std::vector<size_t>> shares(size_t n, int replicas, size_t epoch, const DistributedSamplerOptions& o) {
  std::vector<std::vector<size_t>> out;
  for (int r = 0; r < replicas; ++r) out.push_back(distributed_indices(n, replicas, r, epoch, o));
  return out;
}

std::vector<size_t> drain(DistributedSampler& sampler, size_t batch) {
  std::vector<size_t> all;
  while (auto b = sampler.next(batch)) all.insert(all.end(), b->begin(), b->end());
  return all;
}

TEST(DistributedSampler, ShardsAreDisjointAndCoverTheDataSet) {
  for (int replicas : {1, 2, 3, 4}) {
    const auto s = shares(12, replicas, 0, {});
    std::multiset<size_t> seen;
    for (const auto& share : s) {
      EXPECT_EQ(share.size(), 12u / replicas);
      seen.insert(share.begin(), share.end());
    }
    std::vector<size_t> expected(12);
    std::iota(expected.begin(), expected.end(), 0);
    EXPECT_EQ(std::vector<size_t>(seen.begin(), seen.end()), expected) << replicas << " replicas";
  }
}

TEST(DistributedSampler, PadsFromTheStartOrDropsTheTail) {
  DistributedSamplerOptions in_order;
  in_order.shuffle = false;
  // 10 over 3 ranks: 4 each, the padding repeats indices 0 and 1.
  const auto padded = shares(10, 3, 0, in_order);
  EXPECT_EQ(padded[0], (std::vector<size_t>{0, 3, 6, 9}));
  EXPECT_EQ(padded[1], (std::vector<size_t>{1, 4, 7, 0}));
  EXPECT_EQ(padded[2], (std::vector<size_t>{2, 5, 8, 1}));
  // 2 over 3 ranks: the list repeats more than once.
  EXPECT_EQ(shares(2, 3, 0, in_order)[2], (std::vector<size_t>{0}));
  in_order.drop_last = true;
  const auto dropped = shares(10, 3, 0, in_order);
  EXPECT_EQ(dropped[0], (std::vector<size_t>{0, 3, 6}));
  EXPECT_EQ(dropped[2], (std::vector<size_t>{2, 5, 8}));
  EXPECT_TRUE(shares(2, 3, 0, in_order)[0].empty());
  DistributedSampler sampler(10, 3, 1, in_order);
  EXPECT_EQ(sampler.num_samples(), 3u);
  EXPECT_EQ(sampler.total_size(), 9u);

  // Shuffled and padded: the padding is the first indices of the permutation.
  const auto shuffled = shares(10, 3, 5, {});
  EXPECT_EQ(shuffled[1][3], shuffled[0][0]);
  EXPECT_EQ(shuffled[2][3], shuffled[1][0]);
}

TEST(DistributedSampler, TheShuffleFollowsSeedAndEpoch) {
  DistributedSamplerOptions options;
  options.seed = 42;
  const auto epoch0 = shares(100, 4, 0, options);
  EXPECT_EQ(shares(100, 4, 0, options), epoch0) << "every rank computes the same permutation";
  EXPECT_NE(shares(100, 4, 1, options), epoch0) << "a new epoch, a new order";
  options.seed = 43;
  EXPECT_NE(shares(100, 4, 0, options), epoch0);
  std::vector<size_t> sorted = epoch0[0];
  std::sort(sorted.begin(), sorted.end());
  EXPECT_NE(sorted, epoch0[0]) << "shuffled";
}

TEST(DistributedSampler, BatchesEpochsAndCopiesShareTheEpoch) {
  DistributedSampler sampler(50, 2, 1);
  DistributedSampler loaders_copy = sampler;  // what make_data_loader keeps
  EXPECT_EQ(drain(loaders_copy, 7), distributed_indices(50, 2, 1, 0));
  EXPECT_FALSE(loaders_copy.next(7).has_value());
  sampler.set_epoch(3);
  loaders_copy.reset();  // a loader's begin()
  auto first = loaders_copy.next(7);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->size(), 7u);
  const std::vector<size_t> epoch3 = distributed_indices(50, 2, 1, 3);
  EXPECT_TRUE(std::equal(first->begin(), first->end(), epoch3.begin()));
  EXPECT_EQ(drain(loaders_copy, 100).size(), 25u - 7u);
  loaders_copy.reset(/*new_size=*/8);
  EXPECT_EQ(drain(loaders_copy, 100), distributed_indices(8, 2, 1, 3));
}

TEST(DistributedSampler, SaveAndLoadResumeMidEpoch) {
  DistributedSampler sampler(40, 2, 0);
  sampler.set_epoch(2);
  sampler.reset();
  sampler.next(5);
  ::torch::serialize::OutputArchive archive;
  sampler.save(archive);
  std::ostringstream bytes;
  archive.save_to(bytes);

  DistributedSampler resumed(40, 2, 0);
  ::torch::serialize::InputArchive in;
  std::istringstream source(bytes.str());
  in.load_from(source);
  resumed.load(in);
  EXPECT_EQ(resumed.epoch(), 2u);
  EXPECT_EQ(drain(resumed, 100), drain(sampler, 100));
}

TEST(DistributedSampler, RefusesARankOutsideTheReplicas) {
  EXPECT_THROW(DistributedSampler(10, 2, 2), InvalidArgument);
  EXPECT_THROW(DistributedSampler(10, 0, 0), InvalidArgument);
  EXPECT_THROW(distributed_indices(10, 2, -1, 0), InvalidArgument);
}

}  // namespace
}  // namespace torch
}  // namespace distcomm
