// resumable_train: DDP training that survives a failure -- it checkpoints and resumes.
//
//   $ bazel build //examples:resumable_train //tools/launch
//   $ bazel-bin/tools/launch/launch --nproc_per_node=4 --max_restarts=2 --
//       bazel-bin/examples/resumable_train --checkpoint_dir=/tmp/ckpt --fail_at_step=45
//
// Every rank trains the same small MLP (nn/, example code) with DistributedDataParallel and
// SGD with momentum on its slice of each global batch. Every --checkpoint_every steps, rank
// 0 writes the model and the optimizer's state (the momentum buffers) and the step count
// into one new file (examples/checkpoint.h: tensors by name, written atomically). At start,
// rank 0 reads the newest checkpoint and every rank continues from it: the momentum and
// the step are broadcast, and DDP copies rank 0's weights to all. A job that the launcher
// restarts after a failure therefore continues where its last checkpoint left it, and ends
// with the loss of a run that never failed.
//
// --fail_at_step=S makes rank --fail_rank kill itself (SIGKILL, as if the machine had lost
// it) when it reaches step S, on the job's first attempt only (DISTCOMM_RESTART_COUNT 0):
// the restarted job runs through.
//
// Lines for measuring a restart: the killed rank says when it died, and rank 0 says when
// the first step of each attempt was completed (Unix time in ns, one clock on one host).
#include <gflags/gflags.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include <distcomm/api/errors.h>
#include <distcomm/api/init.h>
#include <distcomm/api/run_main.h>
#include <distcomm/ddp/distributed_data_parallel.h>
#include "examples/checkpoint.h"
#include "examples/mean_over_ranks.h"
#include "examples/self_launch.h"
#include "examples/nn/loss.h"
#include "examples/nn/sequential.h"
#include "examples/nn/synthetic_data.h"

DEFINE_string(checkpoint_dir, "", "folder of the checkpoints (required; created if needed)");
DEFINE_int32(checkpoint_every, 20, "rank 0 writes a checkpoint after every this many steps");
DEFINE_int32(keep_checkpoints, 3, "rank 0 keeps the newest this many checkpoints and deletes older ones (0: keeps all)");
DEFINE_int32(steps, 200, "training steps in all");
DEFINE_int32(batch, 32, "samples per rank per step");
DEFINE_int32(samples, 4096, "size of the synthetic data set");
DEFINE_int32(hidden, 64, "width of the two hidden layers");
DEFINE_double(lr, 0.002, "learning rate");
DEFINE_double(momentum, 0.9, "SGD momentum");
DEFINE_int32(log_every, 50, "rank 0 prints the loss every this many steps (0: only at the end)");
DEFINE_int32(fail_at_step, -1, "on the first attempt, --fail_rank kills itself when it reaches this step (-1: never)");
DEFINE_int32(fail_rank, 1, "the rank that --fail_at_step kills");

namespace {

using distcomm::Tensor;
namespace ddp = distcomm::ddp;
using Clock = std::chrono::steady_clock;

constexpr int64_t kFeatures = 16, kClasses = 4;

int64_t unix_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int restart_count() {
  const char* v = std::getenv("DISTCOMM_RESTART_COUNT");
  return v ? std::atoi(v) : 0;
}

// torch.optim.SGD with momentum (no dampening): v = momentum * v + g; p -= lr * v. Its
// state, the buffers v, is part of a checkpoint: without it a resumed run would diverge.
class MomentumSgd {
 public:
  MomentumSgd(std::vector<nn::Parameter*> params, float lr, float momentum)
      : params_(std::move(params)), lr_(lr), momentum_(momentum) {
    for (nn::Parameter* p : params_) velocity_.push_back(Tensor::zeros(p->value.shape()));
  }
  void zero_grad() {
    for (nn::Parameter* p : params_) p->grad.fill(0.0);
  }
  void step() {
    for (size_t i = 0; i < params_.size(); ++i) {
      float* w = params_[i]->value.data_as<float>();
      const float* g = params_[i]->grad.data_as<float>();
      float* v = velocity_[i].data_as<float>();
      for (int64_t j = 0; j < velocity_[i].numel(); ++j) {
        v[j] = momentum_ * v[j] + g[j];
        w[j] -= lr_ * v[j];
      }
    }
  }
  // "momentum.<parameter name>" for each buffer.
  std::vector<std::pair<std::string, Tensor>> state() const {
    std::vector<std::pair<std::string, Tensor>> named;
    for (size_t i = 0; i < params_.size(); ++i) named.emplace_back("momentum." + params_[i]->name, velocity_[i]);
    return named;
  }

 private:
  std::vector<nn::Parameter*> params_;
  std::vector<Tensor> velocity_;
  float lr_, momentum_;
};

// Rank 0 reads the newest checkpoint into the model and the optimizer; the others get the
// optimizer state and the step from it (DDP's constructor then copies rank 0's weights).
// Only rank 0 chooses the file, so every rank continues from the same one. Returns the step
// to continue from.
int64_t resume(distcomm::ProcessGroup& pg, nn::Sequential& model, MomentumSgd& sgd) {
  Tensor step = Tensor::of<int64_t>({0});
  if (pg.rank() == 0) {
    // No writer runs now (the ranks of an earlier attempt are gone): what one killed
    // halfway left is garbage.
    examples::remove_temporary_files(FLAGS_checkpoint_dir);
    // The shapes are checked while the file is chosen: a checkpoint of another model (another
    // --hidden) is skipped for an older one rather than failing the copy below.
    examples::TensorShapes needed;
    for (nn::Parameter* p : model.parameters()) needed.emplace_back(p->name, p->value);
    for (auto& named : sgd.state()) needed.push_back(named);
    std::optional<examples::Checkpoint> ckpt = examples::newest_checkpoint(FLAGS_checkpoint_dir, needed);
    if (ckpt) {
      for (nn::Parameter* p : model.parameters()) p->value.copy_from(ckpt->at(p->name));
      for (auto& [name, buffer] : sgd.state()) buffer.copy_from(ckpt->at(name));
      step.set_item(0, static_cast<double>(ckpt->step));
      std::printf("resuming from %s (step %lld)\n", ckpt->path.c_str(), static_cast<long long>(ckpt->step));
      // Resumed anyway, not refused: the weights and momentum are sound, only the batches
      // from here on differ (each rank reads world size x --batch samples a step), as in an
      // elastic job whose size changed. Refusing would throw away all progress, since every
      // checkpoint of that run has the other size. The run no longer matches either one.
      if (ckpt->world_size != 0 && ckpt->world_size != pg.size()) {
        std::printf("%s was written by a run of %lld ranks, this one has %d: resuming anyway, but the batches "
                    "differ from here on and the loss will not match a run of either size\n",
                    ckpt->path.c_str(), static_cast<long long>(ckpt->world_size), pg.size());
      }
    } else {
      std::printf("no usable checkpoint in %s: starting at step 0\n", FLAGS_checkpoint_dir.c_str());
    }
  }
  pg.broadcast(step)->wait();
  for (auto& [name, buffer] : sgd.state()) pg.broadcast(buffer)->wait();
  return static_cast<int64_t>(step.item());
}

void save(int64_t step, int world, nn::Sequential& model, const MomentumSgd& sgd) {
  examples::Checkpoint ckpt;
  ckpt.step = step;
  ckpt.world_size = world;
  for (nn::Parameter* p : model.parameters()) ckpt.tensors.emplace_back(p->name, p->value);
  for (auto& named : sgd.state()) ckpt.tensors.push_back(named);
  examples::write_checkpoint(FLAGS_checkpoint_dir, ckpt);
  examples::remove_older_checkpoints(FLAGS_checkpoint_dir, FLAGS_keep_checkpoints);
}

}  // namespace

int main(int argc, char** argv) {
  const Clock::time_point started = Clock::now();
  // Line-buffered even into a pipe or a file (the launcher's, a `> log`): an attempt the
  // launcher restarts ends by its SIGTERM, which would drop a block-buffered stdout, and
  // with it rank 0's progress lines of that attempt.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  return distcomm::run_main("resumable_train", [&] {
    distcomm::InitOptions init = distcomm::examples::self_launch(argc, argv, /*default_nproc=*/2);
    if (FLAGS_checkpoint_dir.empty()) throw distcomm::InvalidArgument("--checkpoint_dir is required");
    if (FLAGS_checkpoint_every < 1) throw distcomm::InvalidArgument("--checkpoint_every must be at least 1");
    distcomm::ProcessGroupPtr pg = distcomm::init_process_group(init);
    const int rank = pg->rank(), world = pg->size();

    auto model = nn::make_mlp({kFeatures, FLAGS_hidden, FLAGS_hidden, kClasses}, /*seed=*/1);
    MomentumSgd sgd(model->parameters(), static_cast<float>(FLAGS_lr), static_cast<float>(FLAGS_momentum));
    const int64_t first_step = resume(*pg, *model, sgd);
    std::vector<ddp::NamedParameter> params;
    for (nn::Parameter* p : model->parameters()) params.push_back({p->name, &p->value, &p->grad});
    ddp::DistributedDataParallel ddp_model(*pg, params);

    const nn::Dataset data = nn::make_blobs(FLAGS_samples, kFeatures, kClasses, /*seed=*/2024);
    const int64_t global_batch = static_cast<int64_t>(world) * FLAGS_batch;
    const int64_t batches = data.size() / global_batch;
    if (first_step >= FLAGS_steps) {
      if (rank == 0) std::printf("the checkpoint is of step %lld: nothing left to train\n", static_cast<long long>(first_step));
      return 0;
    }
    const bool first_attempt = restart_count() == 0;
    double last_loss = 0;
    for (int64_t step = first_step; step < FLAGS_steps; ++step) {
      if (first_attempt && step == FLAGS_fail_at_step && rank == FLAGS_fail_rank) {
        std::printf("rank %d kills itself at step %lld (unix_ns %lld)\n", rank, static_cast<long long>(step),
                    static_cast<long long>(unix_ns()));
        std::fflush(stdout);
        ::raise(SIGKILL);
      }
      // Which batch a step trains on depends on the step only: a resumed run sees the
      // same data in the same order as one that never stopped.
      const int64_t begin = (step % batches) * global_batch + rank * FLAGS_batch;
      const std::vector<int64_t> labels = nn::rows(data.labels, begin, FLAGS_batch);
      sgd.zero_grad();
      Tensor logits = model->forward(nn::rows(data.inputs, begin, FLAGS_batch));
      nn::LossResult loss = nn::softmax_cross_entropy(logits, labels);
      model->backward(loss.grad, [&](size_t i) { ddp_model.mark_grad_ready(i); });
      ddp_model.finish_backward();
      sgd.step();
      const int64_t done = step + 1;
      if (done == first_step + 1 && rank == 0) {
        std::printf("first step of this attempt (%lld) done at unix_ns %lld, %.3f s after the process started\n",
                    static_cast<long long>(done), static_cast<long long>(unix_ns()),
                    std::chrono::duration<double>(Clock::now() - started).count());
      }
      if (rank == 0 && done % FLAGS_checkpoint_every == 0) save(done, world, *model, sgd);
      last_loss = loss.value;
      if ((FLAGS_log_every > 0 && done % FLAGS_log_every == 0) || done == FLAGS_steps) {
        const double mean = distcomm::examples::mean_over_ranks(*pg, last_loss);
        if (rank == 0) std::printf("step %lld/%d: loss %.9g\n", static_cast<long long>(done), FLAGS_steps, mean);
      }
    }
    const double final_loss = distcomm::examples::mean_over_ranks(*pg, last_loss);
    if (rank == 0) std::printf("final loss %.9g after %d steps\n", final_loss, FLAGS_steps);
    return 0;
  });
}
