#include "tools/ft_bench/training.h"

#include <cstdio>
#include <cstring>

#include "examples/nn/loss.h"

namespace distcomm {
namespace ft_bench {
namespace {

constexpr int64_t kFeatures = 32, kClasses = 4, kSamples = 8192;

std::vector<int64_t> widths(const TrainingShape& shape) {
  std::vector<int64_t> w{kFeatures};
  for (int i = 0; i < shape.layers; ++i) w.push_back(shape.width);
  w.push_back(kClasses);
  return w;
}

}  // namespace

// Every process starts from the same weights (seed 7), as a checkpoint would give them.
Training::Training(const TrainingShape& shape)
    : shape_(shape),
      model_(nn::make_mlp(widths(shape), /*seed=*/7)),
      sgd_(model_->parameters(), 0.01f),
      data_(nn::make_blobs(kSamples, kFeatures, kClasses, /*seed=*/2026)) {}

std::string Training::signature_of(const TrainingShape& shape) {
  return "mlp " + std::to_string(kFeatures) + "-" + std::to_string(shape.width) + "x" + std::to_string(shape.layers) +
         "-" + std::to_string(kClasses) + " f32, sgd";
}

void Training::forward_backward(int64_t step, int64_t begin, int64_t end, const nn::GradReadyHook& on_grad_ready) {
  const int64_t first = (step * shape_.global_batch) % (kSamples - shape_.global_batch) + begin;
  const int64_t count = end - begin;
  sgd_.zero_grad();
  const Tensor inputs = nn::rows(data_.inputs, first, count);
  const std::vector<int64_t> labels = nn::rows(data_.labels, first, count);
  Tensor logits = model_->forward(inputs);
  nn::LossResult loss = nn::softmax_cross_entropy(logits, labels);
  model_->backward(loss.grad, on_grad_ready);
}

std::string Training::checksum() {
  uint64_t h = 1469598103934665603ull;
  for (nn::Parameter* p : model_->parameters()) {
    const auto* bytes = static_cast<const unsigned char*>(p->value.data());
    const size_t n = p->value.nbytes();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t word;
      std::memcpy(&word, bytes + i, 8);
      h = (h ^ word) * 1099511628211ull;
    }
    for (; i < n; ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  }
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(h));
  return text;
}

}  // namespace ft_bench
}  // namespace distcomm
