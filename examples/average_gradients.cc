// average_gradients: data-parallel training written by hand, the way the torch.distributed
// tutorial does it before it introduces DistributedDataParallel.
//
//   $ bazel run //examples:average_gradients -- --nproc=3
//   epoch 0: mean loss 0.30...
//   ...
//   rank 0: parameter checksum ...     (the same on every rank: the replicas never diverge)
//   rank 0 saved the model to /home/you/average_gradients_model.5f0c3e8a91d2b467.txt
//
// The model goes into the folder the program was started from (with `bazel run`, the one
// bazel was run from), named after the job (job_file.h), so that two jobs never write one
// file; --model_path chooses another. The last line names the file.
//
// Every rank holds the same model and trains on its own slice of each global batch. After
// backward, each gradient is summed over the ranks with all_reduce and divided by the world
// size, so every rank takes the same optimizer step. The loss is averaged the same way
// (reduce_mean) so that rank 0 can report the loss of the whole batch.
#include <gflags/gflags.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include <distcomm/api/init.h>
#include <distcomm/api/logging.h>
#include <distcomm/api/run_main.h>
#include "examples/job_file.h"
#include "examples/nn/loss.h"
#include "examples/nn/sequential.h"
#include "examples/nn/sgd.h"
#include "examples/nn/synthetic_data.h"
#include "examples/self_launch.h"

DEFINE_int32(epochs, 5, "passes over the data set");
DEFINE_int32(batch_per_rank, 16, "samples each rank trains on per step");
DEFINE_double(learning_rate, 0.1, "SGD step size");
DEFINE_string(model_path, "",
              "where rank 0 saves the trained model (default: average_gradients_model.<run id>.txt in the folder "
              "the program was started from; a relative path is in that folder too)");

using distcomm::ProcessGroup;
using distcomm::Tensor;

namespace {

// The heart of the example: afterwards every rank holds the mean of all ranks' gradients.
// (AllReduceOptions{ReduceOp::AVG} does the sum and the division in one call.)
void average_gradients(ProcessGroup& pg, nn::Sequential& model) {
  for (nn::Parameter* p : model.parameters()) {
    pg.all_reduce(p->grad)->wait();
    float* g = p->grad.data_as<float>();
    for (int64_t i = 0; i < p->grad.numel(); ++i) g[i] /= pg.size();
  }
}

// The mean of one number over all ranks.
double reduce_mean(ProcessGroup& pg, double value) {
  Tensor t = Tensor::of({value});
  pg.all_reduce(t)->wait();
  return t.item() / pg.size();
}

double checksum(nn::Sequential& model) {
  double sum = 0;
  for (nn::Parameter* p : model.parameters()) {
    for (double v : p->value.to_doubles()) sum += v;
  }
  return sum;
}

void save(nn::Sequential& model, const std::string& path) {
  std::ofstream out(path);
  out.precision(9);  // enough digits to read every float32 back exactly
  for (nn::Parameter* p : model.parameters()) {
    out << p->name << " " << p->value.describe() << "\n";
    for (double v : p->value.to_doubles()) out << v << " ";
    out << "\n";
  }
  if (!out) throw std::runtime_error("cannot write the model to " + path);
}

}  // namespace

int main(int argc, char** argv) {
  return distcomm::run_main("average_gradients", [&] {
    // Run by hand, this starts --nproc copies of the program and exits; each copy is a rank.
    distcomm::InitOptions init = distcomm::examples::self_launch(argc, argv, /*default_nproc=*/3);
    distcomm::ProcessGroupPtr world = distcomm::init_process_group(init);
    ProcessGroup& pg = *world;

    // The same seed on every rank: the same data set and the same initial weights.
    const int64_t batch = FLAGS_batch_per_rank;
    const int64_t global_batch = batch * pg.size();
    const nn::Dataset data = nn::make_regression(/*size=*/global_batch * 8, /*features=*/4, /*outputs=*/1, /*seed=*/7);
    std::unique_ptr<nn::Sequential> model = nn::make_mlp({4, 16, 1}, /*seed=*/42);
    nn::Sgd sgd(model->parameters(), static_cast<float>(FLAGS_learning_rate));

    for (int epoch = 0; epoch < FLAGS_epochs; ++epoch) {
      double epoch_loss = 0;
      int steps = 0;
      for (int64_t start = 0; start + global_batch <= data.size(); start += global_batch, ++steps) {
        // This rank's slice of the global batch.
        const int64_t first = start + pg.rank() * batch;
        Tensor prediction = model->forward(nn::rows(data.inputs, first, batch));
        nn::LossResult loss = nn::mse_loss(prediction, nn::rows(data.targets, first, batch));
        sgd.zero_grad();
        model->backward(loss.grad);
        average_gradients(pg, *model);
        sgd.step();
        epoch_loss += reduce_mean(pg, loss.value);
      }
      if (pg.rank() == 0) std::cout << "epoch " << epoch << ": mean loss " << epoch_loss / steps << std::endl;
    }

    std::ostringstream sum;
    sum.precision(9);
    sum << "rank " << pg.rank() << ": parameter checksum " << checksum(*model);
    distcomm::ordered_print(pg, sum.str(), /*prefix=*/false);

    // Every replica is identical, so one copy is enough: only rank 0 writes it.
    if (pg.rank() == 0) {
      const std::string path = FLAGS_model_path.empty() ? distcomm::examples::job_file("average_gradients_model", "txt")
                                                        : distcomm::examples::user_path(FLAGS_model_path);
      save(*model, path);
      std::cout << "rank 0 saved the model to " << path << std::endl;
    }
    return 0;
  });
}
