#include "tests/ddp/training.h"

#include <gtest/gtest.h>

#include <cmath>

#include "examples/nn/loss.h"
#include "examples/nn/sgd.h"
#include "examples/nn/synthetic_data.h"

namespace distcomm {
namespace ddp {
namespace test {
namespace {

nn::Dataset dataset_for(int world, const Problem& p) {
  const int64_t rows = static_cast<int64_t>(p.steps) * p.micro_batches * world * p.batch_per_rank;
  return nn::make_regression(rows, p.widths.front(), p.widths.back(), /*seed=*/7);
}

std::vector<Tensor> snapshot(const std::vector<nn::Parameter*>& params, bool grads) {
  std::vector<Tensor> out;
  for (nn::Parameter* p : params) out.push_back((grads ? p->grad : p->value).clone());
  return out;
}

// One forward and backward pass over rows [begin, begin + count), gradients added.
void forward_backward(nn::Sequential& model, const nn::Dataset& data, int64_t begin, int64_t count,
                      const nn::GradReadyHook& hook) {
  Tensor out = model.forward(nn::rows(data.inputs, begin, count));
  model.backward(nn::mse_loss(out, nn::rows(data.targets, begin, count)).grad, hook);
}

}  // namespace

std::vector<NamedParameter> ddp_parameters(nn::Sequential& model) {
  std::vector<NamedParameter> list;
  for (nn::Parameter* p : model.parameters()) list.push_back({p->name, &p->value, &p->grad});
  return list;
}

std::unique_ptr<nn::Sequential> make_model(const Problem& problem, int rank) {
  return nn::make_mlp(problem.widths, /*seed=*/100 + 1000 * static_cast<uint64_t>(rank));
}

Trace train_with_ddp(ProcessGroup& pg, const Problem& p, const DdpOptions& options) {
  auto model = make_model(p, pg.rank());
  DistributedDataParallel ddp(pg, ddp_parameters(*model), options);
  nn::Sgd sgd(model->parameters(), p.learning_rate);
  const nn::Dataset data = dataset_for(pg.size(), p);
  const int64_t global_batch = pg.size() * p.batch_per_rank;
  Trace trace;
  for (int step = 0; step < p.steps; ++step) {
    sgd.zero_grad();
    for (int m = 0; m < p.micro_batches; ++m) {
      const int64_t begin = (static_cast<int64_t>(step) * p.micro_batches + m) * global_batch +
                            pg.rank() * p.batch_per_rank;
      const bool last = m + 1 == p.micro_batches;
      auto pass = [&] {
        forward_backward(*model, data, begin, p.batch_per_rank, [&](size_t i) { ddp.mark_grad_ready(i); });
        ddp.finish_backward();
      };
      if (last) {
        pass();
      } else {
        auto guard = ddp.no_sync();
        pass();
      }
    }
    trace.grads.push_back(snapshot(model->parameters(), true));
    sgd.step();
  }
  trace.params = snapshot(model->parameters(), false);
  trace.buckets = ddp.buckets();
  return trace;
}

Trace train_single_process(int world, const Problem& p) {
  auto model = make_model(p, 0);
  nn::Sgd sgd(model->parameters(), p.learning_rate);
  const nn::Dataset data = dataset_for(world, p);
  const int64_t global_batch = world * p.batch_per_rank;
  Trace trace;
  for (int step = 0; step < p.steps; ++step) {
    sgd.zero_grad();
    for (int m = 0; m < p.micro_batches; ++m) {
      forward_backward(*model, data, (static_cast<int64_t>(step) * p.micro_batches + m) * global_batch, global_batch, {});
    }
    trace.grads.push_back(snapshot(model->parameters(), true));
    sgd.step();
  }
  trace.params = snapshot(model->parameters(), false);
  return trace;
}

double relative_error(const Tensor& a, const Tensor& b) {
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < b.numel(); ++i) {
    const double d = a.item(i) - b.item(i);
    diff += d * d;
    norm += b.item(i) * b.item(i);
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

void expect_same_trace(const Trace& ddp, const Trace& reference, double tolerance, const std::string& context) {
  ASSERT_EQ(ddp.grads.size(), reference.grads.size()) << context;
  for (size_t step = 0; step < reference.grads.size(); ++step) {
    for (size_t i = 0; i < reference.grads[step].size(); ++i) {
      EXPECT_LE(relative_error(ddp.grads[step][i], reference.grads[step][i]), tolerance)
          << context << ": gradient " << i << " after step " << step;
    }
  }
  for (size_t i = 0; i < reference.params.size(); ++i) {
    EXPECT_LE(relative_error(ddp.params[i], reference.params[i]), tolerance) << context << ": parameter " << i;
  }
}

}  // namespace test
}  // namespace ddp
}  // namespace distcomm
