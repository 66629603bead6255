// EXAMPLE CODE: see layers.h.
#include "examples/nn/layers.h"

#include <cmath>
#include <stdexcept>

#include "examples/nn/random.h"

namespace nn {
namespace {

using distcomm::Tensor;

// Dot product with eight partial sums: the compiler may not reorder a float reduction,
// so independent accumulators are what lets it pipeline (and vectorise) the loop.
float dot(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) acc[k] += a[i + k] * b[i + k];
  }
  float sum = 0;
  for (; i < n; ++i) sum += a[i] * b[i];
  for (float v : acc) sum += v;
  return sum;
}

// y[0..n) += alpha * x[0..n)
void axpy(float alpha, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

void check_features(const Tensor& t, int64_t features, const char* what) {
  if (t.dim() != 2 || t.shape()[1] != features) {
    throw std::invalid_argument(std::string(what) + ": expected [batch, " + std::to_string(features) +
                                "], got " + t.describe());
  }
}

Parameter make_parameter(const std::string& name, std::vector<int64_t> shape, float bound, Random& rng) {
  Parameter p{name, Tensor::empty(shape), Tensor::zeros(shape)};
  float* v = p.value.data_as<float>();
  for (int64_t i = 0; i < p.value.numel(); ++i) v[i] = rng.uniform(-bound, bound);
  return p;
}

}  // namespace

Linear::Linear(int64_t in, int64_t out, uint64_t seed, const std::string& name) : in_(in), out_(out) {
  Random rng(seed);
  const float bound = 1.0f / std::sqrt(static_cast<float>(in));
  weight_ = make_parameter(name + ".weight", {in, out}, bound, rng);
  bias_ = make_parameter(name + ".bias", {out}, bound, rng);
}

Tensor Linear::forward(const Tensor& input) {
  check_features(input, in_, "Linear::forward");
  input_ = input;
  const int64_t batch = input.shape()[0];
  Tensor output = Tensor::empty({batch, out_});
  const float* x = input.data_as<float>();
  const float* w = weight_.value.data_as<float>();
  const float* b = bias_.value.data_as<float>();
  float* y = output.data_as<float>();
  for (int64_t r = 0; r < batch; ++r) {
    float* yr = y + r * out_;
    for (int64_t o = 0; o < out_; ++o) yr[o] = b[o];
    for (int64_t i = 0; i < in_; ++i) axpy(x[r * in_ + i], w + i * out_, yr, out_);
  }
  return output;
}

Tensor Linear::backward(const Tensor& grad_output, bool need_input_grad) {
  check_features(grad_output, out_, "Linear::backward");
  const int64_t batch = grad_output.shape()[0];
  const float* g = grad_output.data_as<float>();
  const float* x = input_.data_as<float>();
  const float* w = weight_.value.data_as<float>();
  float* dw = weight_.grad.data_as<float>();
  float* db = bias_.grad.data_as<float>();
  Tensor grad_input = need_input_grad ? Tensor::empty({batch, in_}) : Tensor();
  for (int64_t r = 0; r < batch; ++r) {
    const float* gr = g + r * out_;
    axpy(1.0f, gr, db, out_);
    for (int64_t i = 0; i < in_; ++i) axpy(x[r * in_ + i], gr, dw + i * out_, out_);
    if (need_input_grad) {
      float* dx = grad_input.data_as<float>() + r * in_;
      for (int64_t i = 0; i < in_; ++i) dx[i] = dot(w + i * out_, gr, out_);
    }
  }
  return grad_input;
}

Tensor ReLU::forward(const Tensor& input) {
  output_ = input.clone();
  float* y = output_.data_as<float>();
  for (int64_t i = 0; i < output_.numel(); ++i) y[i] = y[i] > 0 ? y[i] : 0.0f;
  return output_;
}

Tensor ReLU::backward(const Tensor& grad_output, bool need_input_grad) {
  if (!need_input_grad) return Tensor();
  Tensor grad_input = grad_output.clone();
  float* g = grad_input.data_as<float>();
  const float* y = output_.data_as<float>();
  for (int64_t i = 0; i < grad_input.numel(); ++i) {
    if (y[i] <= 0) g[i] = 0.0f;
  }
  return grad_input;
}

}  // namespace nn
