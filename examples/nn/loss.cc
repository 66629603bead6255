// EXAMPLE CODE: see loss.h.
#include "examples/nn/loss.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace nn {

using distcomm::Tensor;

LossResult mse_loss(const Tensor& prediction, const Tensor& target) {
  if (prediction.numel() != target.numel()) {
    throw std::invalid_argument("mse_loss: prediction " + prediction.describe() + " vs target " +
                                target.describe());
  }
  LossResult r;
  r.grad = Tensor::empty(prediction.shape());
  const int64_t n = prediction.numel();
  const float* p = prediction.data_as<float>();
  const float* t = target.data_as<float>();
  float* g = r.grad.data_as<float>();
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float d = p[i] - t[i];
    sum += static_cast<double>(d) * d;
    g[i] = 2.0f * d / static_cast<float>(n);
  }
  r.value = n ? sum / static_cast<double>(n) : 0.0;
  return r;
}

namespace {

void check_labels(const Tensor& logits, const std::vector<int64_t>& labels) {
  if (logits.dim() != 2 || logits.shape()[0] != static_cast<int64_t>(labels.size())) {
    throw std::invalid_argument("logits " + logits.describe() + " do not match " +
                                std::to_string(labels.size()) + " labels");
  }
  for (int64_t label : labels) {
    if (label < 0 || label >= logits.shape()[1]) throw std::invalid_argument("label out of range");
  }
}

}  // namespace

LossResult softmax_cross_entropy(const Tensor& logits, const std::vector<int64_t>& labels) {
  check_labels(logits, labels);
  const int64_t batch = logits.shape()[0], classes = logits.shape()[1];
  LossResult r;
  r.grad = Tensor::empty(logits.shape());
  const float* z = logits.data_as<float>();
  float* g = r.grad.data_as<float>();
  double total = 0;
  for (int64_t b = 0; b < batch; ++b) {
    const float* zb = z + b * classes;
    float* gb = g + b * classes;
    const float top = *std::max_element(zb, zb + classes);  // subtract the max: exp cannot overflow
    double denom = 0;
    for (int64_t c = 0; c < classes; ++c) denom += std::exp(static_cast<double>(zb[c] - top));
    for (int64_t c = 0; c < classes; ++c) {
      const double p = std::exp(static_cast<double>(zb[c] - top)) / denom;
      gb[c] = static_cast<float>((p - (c == labels[b] ? 1.0 : 0.0)) / batch);
    }
    total += std::log(denom) - (zb[labels[b]] - top);
  }
  r.value = batch ? total / batch : 0.0;
  return r;
}

double accuracy(const Tensor& logits, const std::vector<int64_t>& labels) {
  check_labels(logits, labels);
  const int64_t batch = logits.shape()[0], classes = logits.shape()[1];
  const float* z = logits.data_as<float>();
  int64_t right = 0;
  for (int64_t b = 0; b < batch; ++b) {
    right += (std::max_element(z + b * classes, z + (b + 1) * classes) - (z + b * classes)) == labels[b];
  }
  return batch ? static_cast<double>(right) / batch : 0.0;
}

}  // namespace nn
