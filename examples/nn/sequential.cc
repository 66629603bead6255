// EXAMPLE CODE: see sequential.h.
#include "examples/nn/sequential.h"

#include <stdexcept>

namespace nn {

using distcomm::Tensor;

void Sequential::add(std::unique_ptr<Layer> layer) {
  layers_.push_back(std::move(layer));
  enabled_.push_back(true);
}

void Sequential::set_enabled(size_t layer, bool enabled) {
  if (layer >= layers_.size()) throw std::out_of_range("Sequential has no layer " + std::to_string(layer));
  if (!enabled && !layers_[layer]->preserves_shape()) {
    throw std::invalid_argument("only a shape-preserving layer can be skipped; layer " +
                                std::to_string(layer) + " changes the shape");
  }
  enabled_[layer] = enabled;
}

Tensor Sequential::forward(const Tensor& input) {
  Tensor x = input;
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (enabled_[i]) x = layers_[i]->forward(x);
  }
  return x;
}

void Sequential::backward(const Tensor& grad_output, const GradReadyHook& on_grad_ready) {
  // Index of each layer's first parameter in parameters() order.
  std::vector<size_t> first_param(layers_.size());
  size_t count = 0;
  for (size_t i = 0; i < layers_.size(); ++i) {
    first_param[i] = count;
    count += layers_[i]->parameters().size();
  }
  size_t first_enabled = layers_.size();
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (enabled_[i]) {
      first_enabled = i;
      break;
    }
  }
  Tensor g = grad_output;
  for (size_t i = layers_.size(); i-- > 0;) {
    if (!enabled_[i]) continue;
    g = layers_[i]->backward(g, /*need_input_grad=*/i != first_enabled);
    if (!on_grad_ready) continue;
    const size_t n = layers_[i]->parameters().size();
    for (size_t k = n; k-- > 0;) on_grad_ready(first_param[i] + k);
  }
}

std::vector<Parameter*> Sequential::parameters() {
  std::vector<Parameter*> all;
  for (auto& layer : layers_) {
    for (Parameter* p : layer->parameters()) all.push_back(p);
  }
  return all;
}

void Sequential::zero_grad() {
  for (Parameter* p : parameters()) p->grad.fill(0.0);
}

std::unique_ptr<Sequential> make_mlp(const std::vector<int64_t>& widths, uint64_t seed) {
  if (widths.size() < 2) throw std::invalid_argument("make_mlp needs at least an input and an output width");
  auto model = std::make_unique<Sequential>();
  for (size_t k = 0; k + 1 < widths.size(); ++k) {
    model->add(std::make_unique<Linear>(widths[k], widths[k + 1], seed + k, "fc" + std::to_string(k)));
    if (k + 2 < widths.size()) model->add(std::make_unique<ReLU>());
  }
  return model;
}

}  // namespace nn
