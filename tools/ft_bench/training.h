// The model, data and step of ft_bench, the same in its in-process (ft) workers and its
// restart-path workers, so that the two differ only in how they survive a failure.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "examples/nn/sequential.h"
#include "examples/nn/sgd.h"
#include "examples/nn/synthetic_data.h"

namespace distcomm {
namespace ft_bench {

struct TrainingShape {
  int layers = 4;
  int width = 256;
  int64_t global_batch = 64;  // samples per step over all ranks, split by the membership
};

class Training {
 public:
  explicit Training(const TrainingShape& shape);
  // "mlp 32-256x4-4 f32, sgd": what a joiner's state must match.
  std::string signature() const { return signature_of(shape_); }
  static std::string signature_of(const TrainingShape& shape);
  std::vector<nn::Parameter*> parameters() { return model_->parameters(); }
  // Forward and backward of step `step` on this rank's share [begin, end) of its global
  // batch; on_grad_ready as Sequential::backward's. Leaves the gradients in the parameters.
  void forward_backward(int64_t step, int64_t begin, int64_t end, const nn::GradReadyHook& on_grad_ready);
  void apply() { sgd_.step(); }
  // FNV-1a 64 over every parameter's bytes, taken 8 at a time (cheap enough for every
  // step), in hex: equal only for bit-identical replicas.
  std::string checksum();

 private:
  TrainingShape shape_;
  std::unique_ptr<nn::Sequential> model_;
  nn::Sgd sgd_;
  nn::Dataset data_;
};

}  // namespace ft_bench
}  // namespace distcomm
