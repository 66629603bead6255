// The example model library (nn/) computes true gradients: checked against finite
// differences, so the DDP tests that use it as their reference compare against real math.
#include <gtest/gtest.h>

#include <cmath>

#include "examples/nn/loss.h"
#include "examples/nn/sequential.h"
#include "examples/nn/synthetic_data.h"

namespace nn {
namespace {

using distcomm::Tensor;

double loss_of(Sequential& model, const Dataset& data, bool classify) {
  Tensor out = model.forward(data.inputs);
  return classify ? softmax_cross_entropy(out, data.labels).value : mse_loss(out, data.targets).value;
}

void check_gradients(bool classify) {
  auto model = make_mlp({5, 7, 6, 3}, 11);
  const Dataset data = classify ? make_blobs(9, 5, 3, 3) : make_regression(9, 5, 3, 3);
  model->zero_grad();
  Tensor out = model->forward(data.inputs);
  LossResult loss = classify ? softmax_cross_entropy(out, data.labels) : mse_loss(out, data.targets);
  model->backward(loss.grad);
  const double center = loss_of(*model, data, classify);
  int checked = 0, kinks = 0;
  for (Parameter* p : model->parameters()) {
    float* v = p->value.data_as<float>();
    for (int64_t i = 0; i < p->value.numel(); i += 3) {
      const float saved = v[i];
      const float h = 1e-3f;
      v[i] = saved + h;
      const double up = loss_of(*model, data, classify);
      v[i] = saved - h;
      const double down = loss_of(*model, data, classify);
      v[i] = saved;
      // One-sided slopes that disagree mean a ReLU switched inside the step: no derivative.
      if (std::fabs((up - center) - (center - down)) / h > 1e-3) {
        ++kinks;
        continue;
      }
      ++checked;
      const double numeric = (up - down) / (2 * h);
      EXPECT_NEAR(p->grad.item(i), numeric, 2e-3 + 2e-2 * std::fabs(numeric)) << p->name << "[" << i << "]";
    }
  }
  EXPECT_LT(kinks * 10, checked) << "too many non-differentiable points to check anything";
}

TEST(NnGradients, MseMatchesFiniteDifferences) { check_gradients(false); }
TEST(NnGradients, CrossEntropyMatchesFiniteDifferences) { check_gradients(true); }

TEST(NnGradients, BackwardReportsParametersInReverseOrderAndAccumulates) {
  auto model = make_mlp({4, 4, 2}, 1);
  const Dataset data = make_regression(3, 4, 2, 5);
  std::vector<size_t> order;
  LossResult loss = mse_loss(model->forward(data.inputs), data.targets);
  model->backward(loss.grad, [&](size_t i) { order.push_back(i); });
  EXPECT_EQ(order, (std::vector<size_t>{3, 2, 1, 0}));
  const double once = model->parameters()[0]->grad.item(0);
  model->backward(loss.grad);
  EXPECT_NEAR(model->parameters()[0]->grad.item(0), 2 * once, 1e-6);
}

TEST(NnGradients, DisabledLayerGetsNoGradient) {
  auto model = make_mlp({4, 4, 4, 2}, 1);  // fc0, relu, fc1, relu, fc2
  model->set_enabled(2, false);
  const Dataset data = make_regression(3, 4, 2, 5);
  std::vector<size_t> order;
  model->backward(mse_loss(model->forward(data.inputs), data.targets).grad, [&](size_t i) { order.push_back(i); });
  EXPECT_EQ(order, (std::vector<size_t>{5, 4, 1, 0}));
  EXPECT_EQ(model->parameters()[2]->grad.item(0), 0.0);
  EXPECT_THROW(model->set_enabled(4, false), std::invalid_argument);  // 4 -> 2 changes the shape
}

}  // namespace
}  // namespace nn
