#include "integrations/torch/distributed_sampler.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/randperm.h>
#include <ATen/ops/scalar_tensor.h>
#include <torch/serialize/archive.h>

#include <algorithm>
#include <string>

#include "api/errors.h"

namespace distcomm {
namespace torch {
namespace {

size_t samples_per_rank(size_t n, int replicas, bool drop_last) {
  const size_t r = static_cast<size_t>(replicas);
  // drop_last: the largest multiple of the ranks that fits (ceil((n - r) / r) in Python).
  if (drop_last && n % r != 0) return n < r ? 0 : n / r;
  return (n + r - 1) / r;
}

void check(int num_replicas, int rank) {
  if (num_replicas < 1) {
    throw InvalidArgument("DistributedSampler: num_replicas must be at least 1, not " + std::to_string(num_replicas));
  }
  if (rank < 0 || rank >= num_replicas) {
    throw InvalidArgument("DistributedSampler: rank " + std::to_string(rank) + " is outside [0, " +
                          std::to_string(num_replicas) + ")");
  }
}

}  // namespace

std::vector<size_t> distributed_indices(size_t n, int num_replicas, int rank, size_t epoch,
                                        const DistributedSamplerOptions& options) {
  check(num_replicas, rank);
  std::vector<size_t> all(n);
  if (options.shuffle) {
    // torch.Generator().manual_seed(seed + epoch) and torch.randperm(n, generator=g), as in Python.
    at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(options.seed + epoch);
    const at::Tensor perm = at::randperm(static_cast<int64_t>(n), generator, at::kLong);
    const int64_t* p = perm.data_ptr<int64_t>();
    for (size_t i = 0; i < n; ++i) all[i] = static_cast<size_t>(p[i]);
  } else {
    for (size_t i = 0; i < n; ++i) all[i] = i;
  }
  const size_t total = samples_per_rank(n, num_replicas, options.drop_last) * static_cast<size_t>(num_replicas);
  // Padding repeats the list from its start, as often as needed.
  for (size_t i = n; i < total; ++i) all.push_back(all[i % n]);
  std::vector<size_t> mine;
  for (size_t i = static_cast<size_t>(rank); i < total; i += static_cast<size_t>(num_replicas)) mine.push_back(all[i]);
  return mine;
}

DistributedSampler::DistributedSampler(size_t dataset_size, int num_replicas, int rank,
                                       DistributedSamplerOptions options)
    : dataset_size_(dataset_size),
      num_replicas_(num_replicas),
      rank_(rank),
      options_(options),
      epoch_(std::make_shared<size_t>(0)) {
  check(num_replicas, rank);
}

DistributedSampler::DistributedSampler(size_t dataset_size, const ProcessGroup& pg, DistributedSamplerOptions options)
    : DistributedSampler(dataset_size, pg.size(), pg.rank(), options) {}

void DistributedSampler::set_epoch(size_t epoch) { *epoch_ = epoch; }
size_t DistributedSampler::epoch() const { return *epoch_; }
size_t DistributedSampler::num_samples() const {
  return samples_per_rank(dataset_size_, num_replicas_, options_.drop_last);
}
size_t DistributedSampler::total_size() const { return num_samples() * static_cast<size_t>(num_replicas_); }

void DistributedSampler::reset(c10::optional<size_t> new_size) {
  if (new_size) dataset_size_ = *new_size;
  prepared_epoch_ = *epoch_;
  indices_ = distributed_indices(dataset_size_, num_replicas_, rank_, prepared_epoch_, options_);
  prepared_ = true;
  position_ = 0;
}

c10::optional<std::vector<size_t>> DistributedSampler::next(size_t batch_size) {
  if (!prepared_) reset();
  if (position_ >= indices_.size()) return c10::nullopt;
  const size_t end = std::min(indices_.size(), position_ + batch_size);
  std::vector<size_t> batch(indices_.begin() + static_cast<std::ptrdiff_t>(position_),
                            indices_.begin() + static_cast<std::ptrdiff_t>(end));
  position_ = end;
  return batch;
}

void DistributedSampler::save(::torch::serialize::OutputArchive& archive) const {
  archive.write("epoch", at::scalar_tensor(static_cast<int64_t>(prepared_ ? prepared_epoch_ : *epoch_), at::kLong),
                /*is_buffer=*/true);
  archive.write("position", at::scalar_tensor(static_cast<int64_t>(position_), at::kLong), /*is_buffer=*/true);
}

void DistributedSampler::load(::torch::serialize::InputArchive& archive) {
  at::Tensor epoch = at::scalar_tensor(0, at::kLong), position = at::scalar_tensor(0, at::kLong);
  archive.read("epoch", epoch, /*is_buffer=*/true);
  archive.read("position", position, /*is_buffer=*/true);
  *epoch_ = static_cast<size_t>(epoch.item<int64_t>());
  reset();
  position_ = std::min(indices_.size(), static_cast<size_t>(position.item<int64_t>()));
}

}  // namespace torch
}  // namespace distcomm
