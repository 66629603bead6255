// EXAMPLE CODE: plain stochastic gradient descent, value -= lr * grad.
#pragma once

#include <vector>

#include "examples/nn/parameter.h"

namespace nn {

class Sgd {
 public:
  Sgd(std::vector<Parameter*> parameters, float learning_rate)
      : parameters_(std::move(parameters)), lr_(learning_rate) {}
  void step();
  void zero_grad();

 private:
  std::vector<Parameter*> parameters_;
  float lr_;
};

}  // namespace nn
