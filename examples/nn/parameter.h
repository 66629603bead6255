// EXAMPLE CODE, not part of distcomm's API: a tiny model library for the examples and the
// DDP tests (see ARCHITECTURE.md, Layers). It is just enough to train a small MLP on the CPU.
//
// A Parameter is a named float32 tensor with a gradient of the same shape. Backward passes
// ADD into grad (as torch does), so gradients accumulate until zero_grad().
#pragma once

#include <string>

#include "api/tensor.h"

namespace nn {

struct Parameter {
  std::string name;
  distcomm::Tensor value;
  distcomm::Tensor grad;
};

}  // namespace nn
