// EXAMPLE CODE: losses of the tiny model library. Each returns the loss value and its
// gradient with respect to the predictions, ready for Sequential::backward.
#pragma once

#include <cstdint>
#include <vector>

#include "api/tensor.h"

namespace nn {

struct LossResult {
  double value = 0;
  distcomm::Tensor grad;  // d(value) / d(predictions), shaped like the predictions
};

// Mean over all elements of (prediction - target)^2.
LossResult mse_loss(const distcomm::Tensor& prediction, const distcomm::Tensor& target);

// Mean over the batch of -log softmax(logits)[label]. logits: [batch, classes].
LossResult softmax_cross_entropy(const distcomm::Tensor& logits, const std::vector<int64_t>& labels);

// Fraction of rows whose largest logit is at the label.
double accuracy(const distcomm::Tensor& logits, const std::vector<int64_t>& labels);

}  // namespace nn
