// EXAMPLE CODE: see synthetic_data.h.
#include "examples/nn/synthetic_data.h"

#include <cmath>
#include <stdexcept>

#include "examples/nn/random.h"

namespace nn {

using distcomm::Tensor;

Dataset make_blobs(int64_t size, int64_t features, int64_t classes, uint64_t seed) {
  Random rng(seed);
  std::vector<float> centres(static_cast<size_t>(classes * features));
  for (float& c : centres) c = rng.uniform(-2.0f, 2.0f);
  Dataset d;
  d.inputs = Tensor::empty({size, features});
  float* x = d.inputs.data_as<float>();
  for (int64_t i = 0; i < size; ++i) {
    const int64_t label = static_cast<int64_t>(rng.next() % static_cast<uint64_t>(classes));
    d.labels.push_back(label);
    for (int64_t f = 0; f < features; ++f) {
      // The sum of three uniforms is a cheap bell curve.
      const float noise = rng.uniform(-1, 1) + rng.uniform(-1, 1) + rng.uniform(-1, 1);
      x[i * features + f] = centres[static_cast<size_t>(label * features + f)] + 0.5f * noise;
    }
  }
  return d;
}

Dataset make_regression(int64_t size, int64_t features, int64_t outputs, uint64_t seed) {
  Random rng(seed);
  std::vector<float> projection(static_cast<size_t>(features * outputs));
  for (float& w : projection) w = rng.uniform(-1.0f, 1.0f);
  Dataset d;
  d.inputs = Tensor::empty({size, features});
  d.targets = Tensor::empty({size, outputs});
  float* x = d.inputs.data_as<float>();
  float* y = d.targets.data_as<float>();
  for (int64_t i = 0; i < size; ++i) {
    for (int64_t f = 0; f < features; ++f) x[i * features + f] = rng.uniform(-1.0f, 1.0f);
    for (int64_t o = 0; o < outputs; ++o) {
      float s = 0;
      for (int64_t f = 0; f < features; ++f) s += x[i * features + f] * projection[static_cast<size_t>(f * outputs + o)];
      y[i * outputs + o] = std::sin(s);
    }
  }
  return d;
}

Tensor rows(const Tensor& t, int64_t begin, int64_t count) {
  if (t.dim() != 2) throw std::invalid_argument("rows() needs a [size, features] tensor");
  const int64_t width = t.shape()[1];
  return t.flat_slice(begin * width, count * width).reshape({count, width});
}

std::vector<int64_t> rows(const std::vector<int64_t>& labels, int64_t begin, int64_t count) {
  if (begin < 0 || count < 0 || begin + count > static_cast<int64_t>(labels.size())) {
    throw std::out_of_range("rows(): labels out of range");
  }
  return std::vector<int64_t>(labels.begin() + begin, labels.begin() + begin + count);
}

}  // namespace nn
