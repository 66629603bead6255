// ddp_train: train a small MLP with DistributedDataParallel on N ranks.
//
//   $ bazel run //examples:ddp_train -- --nproc=2
//
// Every rank builds the same model (DDP copies rank 0's weights to all), takes its own
// slice of each global batch of a deterministic synthetic data set (4 blobs in 16
// dimensions), and tells DDP, during backward, as each gradient is ready; DDP averages the
// gradients across ranks in buckets while backward goes on. Rank 0 prints the loss per
// epoch; at the end every rank's DDP statistics are printed in rank order.
//
// The model code is nn/: example code, not part of distcomm.
#include <gflags/gflags.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <memory>

#include <distcomm/api/errors.h>
#include <distcomm/api/init.h>
#include <distcomm/api/logging.h>
#include <distcomm/api/run_main.h>
#include <distcomm/ddp/distributed_data_parallel.h>
#include "examples/nn/loss.h"
#include "examples/nn/sequential.h"
#include "examples/nn/sgd.h"
#include "examples/nn/synthetic_data.h"
#include "examples/mean_over_ranks.h"
#include "examples/self_launch.h"

DEFINE_int32(epochs, 5, "passes over the data set");
DEFINE_int32(batch, 32, "samples per rank per step (the global batch is nproc times this)");
DEFINE_int32(samples, 4096, "size of the synthetic data set");
DEFINE_int32(hidden, 128, "width of the two hidden layers");
DEFINE_double(lr, 0.02, "SGD learning rate");
DEFINE_double(bucket_cap_mb, 0.05, "DDP bucket cap in MiB (small here so the tiny model gets several buckets)");
DEFINE_bool(bucket_view, false, "gradient_as_bucket_view");
DEFINE_string(hook, "avg", "comm hook: avg, fp16 or bf16");
DEFINE_int32(log_every, 0, "also log DDP statistics every N steps (0: only at the end)");
DEFINE_int32(uneven, 0,
             "uneven inputs: rank r runs N*r fewer steps per epoch than rank 0 (at least 1), inside DDP's join()");

namespace {

using distcomm::Tensor;
namespace ddp = distcomm::ddp;

constexpr int64_t kFeatures = 16, kClasses = 4;

ddp::CommHook hook_named(const std::string& name) {
  if (name == "fp16") return ddp::fp16_compress_hook();
  if (name == "bf16") return ddp::bf16_compress_hook();
  if (name != "avg") throw distcomm::InvalidArgument("--hook must be avg, fp16 or bf16, not '" + name + "'");
  return ddp::allreduce_hook();
}

// A fingerprint of the weights; equal on every rank when the replicas are in sync.
double weight_checksum(nn::Sequential& model) {
  double sum = 0;
  for (nn::Parameter* p : model.parameters()) {
    for (int64_t i = 0; i < p->value.numel(); ++i) sum += p->value.item(i) * static_cast<double>(i % 7 + 1);
  }
  return sum;
}

}  // namespace

int main(int argc, char** argv) {
  return distcomm::run_main("ddp_train", [&] {
    distcomm::InitOptions init = distcomm::examples::self_launch(argc, argv, /*default_nproc=*/2);
    if (FLAGS_uneven < 0) throw distcomm::InvalidArgument("--uneven must be 0 or more, not " + std::to_string(FLAGS_uneven));
    distcomm::ProcessGroupPtr pg = distcomm::init_process_group(init);
    const int rank = pg->rank(), world = pg->size();

    // A different seed per rank on purpose: DDP starts every replica from rank 0's weights.
    auto model = nn::make_mlp({kFeatures, FLAGS_hidden, FLAGS_hidden, kClasses}, /*seed=*/1 + rank);
    std::vector<ddp::NamedParameter> params;
    for (nn::Parameter* p : model->parameters()) params.push_back({p->name, &p->value, &p->grad});
    ddp::DdpOptions options;
    options.bucket_cap_mb = FLAGS_bucket_cap_mb;
    options.gradient_as_bucket_view = FLAGS_bucket_view;
    options.comm_hook = hook_named(FLAGS_hook);
    options.log_every_n = FLAGS_log_every;
    ddp::DistributedDataParallel ddp_model(*pg, params, options);
    nn::Sgd sgd(model->parameters(), static_cast<float>(FLAGS_lr));

    const nn::Dataset data = nn::make_blobs(FLAGS_samples, kFeatures, kClasses, /*seed=*/2024);
    const int64_t global_batch = static_cast<int64_t>(world) * FLAGS_batch;
    const int64_t steps_per_epoch = data.size() / global_batch;
    if (rank == 0) {
      std::printf("training a %lld-%d-%d-%lld MLP on %d ranks, %lld samples, global batch %lld; %s\n",
                  static_cast<long long>(kFeatures), FLAGS_hidden, FLAGS_hidden, static_cast<long long>(kClasses), world,
                  static_cast<long long>(data.size()), static_cast<long long>(global_batch),
                  ddp::describe_buckets(ddp_model.buckets()).c_str());
    }
    // With --uneven, ranks run different numbers of steps (PyTorch's `with model.join():`):
    // a rank whose data ends first joins the others' remaining steps with zero gradients.
    const int64_t my_steps =
        std::max<int64_t>(1, steps_per_epoch - static_cast<int64_t>(FLAGS_uneven) * rank);
    for (int epoch = 1; epoch <= FLAGS_epochs; ++epoch) {
      double loss_sum = 0, accuracy_sum = 0;
      const auto train = [&] {
        for (int64_t step = 0; step < my_steps; ++step) {
          const int64_t begin = step * global_batch + rank * FLAGS_batch;
          const std::vector<int64_t> labels = nn::rows(data.labels, begin, FLAGS_batch);
          sgd.zero_grad();
          Tensor logits = model->forward(nn::rows(data.inputs, begin, FLAGS_batch));
          nn::LossResult loss = nn::softmax_cross_entropy(logits, labels);
          // Backward visits the layers last to first; DDP starts reducing a bucket of
          // gradients as soon as it is full, while the earlier layers are still computed.
          model->backward(loss.grad, [&](size_t i) { ddp_model.mark_grad_ready(i); });
          ddp_model.finish_backward();  // the gradients are now averaged over all ranks
          sgd.step();
          loss_sum += loss.value;
          accuracy_sum += nn::accuracy(logits, labels);
        }
      };
      if (FLAGS_uneven > 0) {
        ddp_model.join(train);  // every rank's loop has ended when it returns
      } else {
        train();
      }
      const double loss = distcomm::examples::mean_over_ranks(*pg, loss_sum / my_steps);
      const double accuracy = distcomm::examples::mean_over_ranks(*pg, accuracy_sum / my_steps);
      if (rank == 0) std::printf("epoch %d/%d: loss %.4f, accuracy %.1f%%\n", epoch, FLAGS_epochs, loss, 100 * accuracy);
    }
    std::fflush(stdout);

    const double checksum = weight_checksum(*model);
    const bool in_sync = distcomm::examples::mean_over_ranks(*pg, checksum) == checksum;  // exact: identical replicas
    distcomm::ordered_print(*pg, "DDP " + ddp_model.last_stats().summary() + "; weights " +
                                     (in_sync ? "identical to the other ranks'" : "DIFFER from the other ranks'"));
    return in_sync ? 0 : 1;
  });
}
