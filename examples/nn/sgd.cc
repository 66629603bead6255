// EXAMPLE CODE: see sgd.h.
#include "examples/nn/sgd.h"

namespace nn {

void Sgd::step() {
  for (Parameter* p : parameters_) {
    float* v = p->value.data_as<float>();
    const float* g = p->grad.data_as<float>();
    for (int64_t i = 0; i < p->value.numel(); ++i) v[i] -= lr_ * g[i];
  }
}

void Sgd::zero_grad() {
  for (Parameter* p : parameters_) p->grad.fill(0.0);
}

}  // namespace nn
