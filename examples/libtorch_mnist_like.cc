// libtorch_mnist_like: a small CNN trained with PyTorch's C++ frontend (libtorch) and
// distcomm's DistributedDataParallel on 2 ranks -- the seed's Python DDP tutorial, in C++.
//
//   $ bazel run //examples:libtorch_mnist_like -- --nproc=2 --save=/tmp/mnist_like.pt
//
// The data set is synthetic and made here (no download): 28x28 one-channel images of 10
// classes, each class a bright square at its own place on a noisy background. Every rank
// builds the same data set; distcomm::torch::DistributedSampler gives each its share of every
// epoch, shuffled with the epoch. Loss is averaged by DDP during loss.backward(); each epoch
// every rank's mean loss is printed in rank order ("[rank R/W] epoch ..."), and rank 0 saves the model (torch::save).
#include <ATen/CPUGeneratorImpl.h>
#include <gflags/gflags.h>
#include <torch/data/dataloader.h>
#include <torch/data/datasets/base.h>
#include <torch/data/datasets/map.h>
#include <torch/data/transforms/stack.h>
#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/functional/pooling.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>
#include <torch/serialize.h>

#include <cstdio>
#include <memory>
#include <string>

#include "api/init.h"
#include "api/logging.h"
#include "api/run_main.h"
#include "examples/job_file.h"
#include "examples/self_launch.h"
#include "integrations/torch/distributed_data_parallel.h"
#include "integrations/torch/distributed_sampler.h"
#include "integrations/torch/tensor_bridge.h"

DEFINE_int32(epochs, 3, "passes over the data set");
DEFINE_int32(batch, 32, "images per rank per step");
DEFINE_int32(samples, 2048, "size of the synthetic data set");
DEFINE_double(lr, 0.05, "SGD learning rate");
DEFINE_string(save, "",
              "where rank 0 saves the trained model (default: libtorch_mnist_like.<run id>.pt in the folder the "
              "program was started from; a relative path is in that folder too)");

namespace {

namespace F = torch::nn::functional;

// 10 classes of 28x28 images: class c is a brighter 6x6 square at one of 3 x 4 places, on
// Gaussian noise. The same images on every rank (one fixed seed).
class SyntheticDigits : public torch::data::datasets::Dataset<SyntheticDigits> {
 public:
  explicit SyntheticDigits(int64_t size) {
    at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(2024);
    images_ = at::randn({size, 1, 28, 28}, generator) * 0.5;
    labels_ = at::arange(size, at::kLong).remainder(10);
    for (int64_t i = 0; i < size; ++i) {
      const int64_t c = i % 10, row = 2 + (c / 4) * 9, col = 2 + (c % 4) * 6;
      images_[i][0].slice(0, row, row + 6).slice(1, col, col + 6).add_(1.5);
    }
  }
  torch::data::Example<> get(size_t index) override {
    return {images_[static_cast<int64_t>(index)], labels_[static_cast<int64_t>(index)]};
  }
  c10::optional<size_t> size() const override { return static_cast<size_t>(images_.size(0)); }

 private:
  at::Tensor images_, labels_;
};

struct Net : torch::nn::Module {
  Net() {
    conv1 = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 8, 5)));
    conv2 = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(8, 16, 5)));
    fc1 = register_module("fc1", torch::nn::Linear(16 * 4 * 4, 64));
    fc2 = register_module("fc2", torch::nn::Linear(64, 10));
  }
  at::Tensor forward(at::Tensor x) {
    x = F::max_pool2d(F::relu(conv1(x)), F::MaxPool2dFuncOptions(2));  // 8 x 12 x 12
    x = F::max_pool2d(F::relu(conv2(x)), F::MaxPool2dFuncOptions(2));  // 16 x 4 x 4
    x = F::relu(fc1(x.flatten(1)));
    return F::log_softmax(fc2(x), F::LogSoftmaxFuncOptions(1));
  }
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};

// A fingerprint of the weights; the same on every rank when the replicas are in step.
double weight_checksum(torch::nn::Module& net) {
  double sum = 0;
  for (const at::Tensor& p : net.parameters()) sum += p.to(at::kDouble).abs().sum().item<double>();
  return sum;
}

}  // namespace

int main(int argc, char** argv) {
  return distcomm::run_main("libtorch_mnist_like", [&] {
    distcomm::InitOptions init = distcomm::examples::self_launch(argc, argv, /*default_nproc=*/2);
    distcomm::ProcessGroupPtr pg = distcomm::init_process_group(init);
    at::set_num_threads(1);  // the ranks share this machine's cores
    const int rank = pg->rank();

    torch::manual_seed(static_cast<uint64_t>(rank));  // differs per rank: DDP copies rank 0's weights
    auto net = std::make_shared<Net>();
    distcomm::torch::DistributedDataParallel ddp(*pg, net);
    torch::optim::SGD optimizer(net->parameters(), torch::optim::SGDOptions(FLAGS_lr).momentum(0.9));

    SyntheticDigits digits(FLAGS_samples);
    distcomm::torch::DistributedSampler sampler(*digits.size(), *pg);
    auto loader = torch::data::make_data_loader(digits.map(torch::data::transforms::Stack<>()), sampler,
                                                torch::data::DataLoaderOptions(static_cast<size_t>(FLAGS_batch)));
    for (int epoch = 1; epoch <= FLAGS_epochs; ++epoch) {
      sampler.set_epoch(static_cast<size_t>(epoch));  // the loader's copy shares it
      double loss_sum = 0;
      int batches = 0;
      for (auto& batch : *loader) {
        optimizer.zero_grad();
        at::Tensor loss = F::nll_loss(net->forward(batch.data), batch.target);
        loss.backward();  // buckets all_reduce during backward; it returns with averaged gradients
        optimizer.step();
        loss_sum += loss.item<double>();
        ++batches;
      }
      char line[128];
      std::snprintf(line, sizeof(line), "epoch %d/%d: loss %.4f over %d batches", epoch, FLAGS_epochs,
                    loss_sum / batches, batches);
      distcomm::ordered_print(*pg, line);
    }

    // Identical replicas: rank 0's checksum is everyone's.
    const double mine = weight_checksum(*net);
    at::Tensor checksum = at::scalar_tensor(mine, at::kDouble);
    distcomm::Tensor view = distcomm::torch::as_tensor(checksum);
    pg->broadcast(view)->wait();
    const bool in_step = checksum.item<double>() == mine;
    distcomm::ordered_print(*pg, std::string("weights ") + (in_step ? "identical to rank 0's" : "DIFFER from rank 0's"));
    if (rank == 0) {
      // As average_gradients' model: a file of the job's own, where the user started it.
      const std::string path = FLAGS_save.empty() ? distcomm::examples::job_file("libtorch_mnist_like", "pt")
                                                  : distcomm::examples::user_path(FLAGS_save);
      torch::save(std::static_pointer_cast<torch::nn::Module>(net), path);
      std::printf("libtorch_mnist_like: trained on %d ranks, model saved to %s\n", pg->size(), path.c_str());
    }
    return in_step ? 0 : 1;
  });
}
