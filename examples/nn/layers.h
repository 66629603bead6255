// EXAMPLE CODE: layers of the tiny model library (Linear, ReLU).
//
// Activations are float32 tensors shaped [batch, features]. forward() keeps what backward()
// needs; backward() adds the parameter gradients into Parameter::grad and returns the
// gradient with respect to the layer's input.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "api/tensor.h"
#include "examples/nn/parameter.h"

namespace nn {

class Layer {
 public:
  virtual ~Layer() = default;
  virtual distcomm::Tensor forward(const distcomm::Tensor& input) = 0;
  // need_input_grad is false for the first layer: nobody reads that gradient.
  virtual distcomm::Tensor backward(const distcomm::Tensor& grad_output, bool need_input_grad) = 0;
  virtual std::vector<Parameter*> parameters() { return {}; }
  // Whether output has the input's shape (only such layers can be switched off).
  virtual bool preserves_shape() const = 0;
};

// y = x W + b, with W stored input-major ([in, out]) so the inner loops run over
// contiguous rows. Initialised like torch.nn.Linear: uniform in +-1/sqrt(in).
class Linear : public Layer {
 public:
  Linear(int64_t in, int64_t out, uint64_t seed, const std::string& name);
  distcomm::Tensor forward(const distcomm::Tensor& input) override;
  distcomm::Tensor backward(const distcomm::Tensor& grad_output, bool need_input_grad) override;
  std::vector<Parameter*> parameters() override { return {&weight_, &bias_}; }
  bool preserves_shape() const override { return in_ == out_; }

 private:
  int64_t in_, out_;
  Parameter weight_, bias_;
  distcomm::Tensor input_;
};

class ReLU : public Layer {
 public:
  distcomm::Tensor forward(const distcomm::Tensor& input) override;
  distcomm::Tensor backward(const distcomm::Tensor& grad_output, bool need_input_grad) override;
  bool preserves_shape() const override { return true; }

 private:
  distcomm::Tensor output_;
};

}  // namespace nn
