// DistributedSampler: each rank's share of a torch::data dataset, as PyTorch's Python
// torch.utils.data.DistributedSampler splits it (same indices for the same seed and epoch).
//
//   distcomm::torch::DistributedSampler sampler(dataset.size().value(), *pg);
//   auto loader = torch::data::make_data_loader(dataset.map(Stack<>()), sampler, batch);
//   for (size_t epoch = 0; epoch < epochs; ++epoch) {
//     sampler.set_epoch(epoch);            // copies share the epoch: the loader's copy follows
//     for (auto& batch : *loader) ...
//   }
//
// Per epoch: the indices 0..n-1, shuffled with a generator seeded with seed + epoch (the
// same permutation on every rank, torch.randperm's), then padded by repeating indices from
// the start until they divide evenly among the ranks (or, with drop_last, cut to the
// largest multiple of the ranks); rank r takes every num_replicas-th index from position r.
// So the ranks' shares are disjoint (apart from the padding) and equally long, and the
// shuffle changes with the epoch.
#pragma once

#include <torch/data/samplers/base.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "api/process_group.h"

namespace distcomm {
namespace torch {

struct DistributedSamplerOptions {
  bool shuffle = true;
  uint64_t seed = 0;  // the same on every rank
  bool drop_last = false;
};

// The indices rank `rank` of `num_replicas` gets for `epoch` (what the sampler yields).
// Throws InvalidArgument for num_replicas < 1 or rank outside [0, num_replicas).
std::vector<size_t> distributed_indices(size_t dataset_size, int num_replicas, int rank, size_t epoch,
                                        const DistributedSamplerOptions& options = {});

class DistributedSampler : public ::torch::data::samplers::Sampler<> {
 public:
  DistributedSampler(size_t dataset_size, int num_replicas, int rank, DistributedSamplerOptions options = {});
  // num_replicas and rank from the group.
  DistributedSampler(size_t dataset_size, const ProcessGroup& pg, DistributedSamplerOptions options = {});

  // The epoch the next reset() (a data loader's begin()) prepares. Shared by copies.
  void set_epoch(size_t epoch);
  size_t epoch() const;
  // Samples per rank per epoch, and for all ranks (num_samples * num_replicas).
  size_t num_samples() const;
  size_t total_size() const;

  // Prepares the epoch set by set_epoch (new_size: a new dataset size).
  void reset(c10::optional<size_t> new_size = c10::nullopt) override;
  // Up to batch_size indices of this epoch; nullopt once they are all taken. Before the
  // first reset() it serves the current epoch.
  c10::optional<std::vector<size_t>> next(size_t batch_size) override;
  // The epoch and the position within it.
  void save(::torch::serialize::OutputArchive& archive) const override;
  void load(::torch::serialize::InputArchive& archive) override;

 private:
  size_t dataset_size_;
  int num_replicas_;
  int rank_;
  DistributedSamplerOptions options_;
  std::shared_ptr<size_t> epoch_;
  std::vector<size_t> indices_;  // this rank's, for prepared_epoch_
  size_t prepared_epoch_ = 0;
  bool prepared_ = false;
  size_t position_ = 0;
};

}  // namespace torch
}  // namespace distcomm
