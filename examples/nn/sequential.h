// EXAMPLE CODE: a chain of layers whose backward pass reports, parameter by parameter,
// when a gradient is final -- the signal DistributedDataParallel needs to start reducing
// gradients while the rest of backward still runs.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "api/tensor.h"
#include "examples/nn/layers.h"

namespace nn {

// Called with the index of a parameter (its position in Sequential::parameters()) once
// its gradient for this backward pass is complete.
using GradReadyHook = std::function<void(size_t parameter_index)>;

class Sequential {
 public:
  void add(std::unique_ptr<Layer> layer);
  distcomm::Tensor forward(const distcomm::Tensor& input);
  // Visits the layers last to first. After each layer, calls on_grad_ready for each of
  // its parameters, last registered first, so gradients become ready in exactly the
  // reverse of parameters() order.
  void backward(const distcomm::Tensor& grad_output, const GradReadyHook& on_grad_ready = {});
  // All parameters, first layer first ("fc0.weight", "fc0.bias", "fc1.weight", ...).
  std::vector<Parameter*> parameters();
  void zero_grad();
  // A disabled layer is skipped in forward and backward (its parameters get no gradient):
  // a model whose control flow leaves some parameters unused. Shape-preserving layers only.
  void set_enabled(size_t layer, bool enabled);
  size_t num_layers() const { return layers_.size(); }

 private:
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<bool> enabled_;
};

// Linear(widths[0], widths[1]), ReLU, Linear(widths[1], widths[2]), ... with no ReLU after
// the last Linear. Linear layer k is named "fc<k>"; its weights come from seed + k.
std::unique_ptr<Sequential> make_mlp(const std::vector<int64_t>& widths, uint64_t seed);

}  // namespace nn
