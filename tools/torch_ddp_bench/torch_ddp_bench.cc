// torch_ddp_bench: what distcomm's DDP costs a libtorch training step, measured the way
// torch_ddp_bench.py measures PyTorch's own DDP on the same model, for compare.sh.
//
//   $ bazel run -c opt //tools/torch_ddp_bench -- --nproc=2
//
// Every rank trains two copies of the same MLP (--layers Linear(width, width) + ReLU,
// float32, MSE loss, SGD) on its own batch: one alone ("local": the same per-rank work, no
// communication), one wrapped in distcomm::torch::DistributedDataParallel (gloo, default
// 25 MiB buckets, averaged during loss.backward()). The two take turns, one iteration each,
// so a change in the machine's load hits both alike, each after an untimed barrier. Reported: the median iteration of each,
// the slowest rank's; exposed communication = DDP's median minus local's (what DDP adds to
// an iteration); and DDP's own statistics (time communicating, the part overlapped with
// backward, the wait at the end). One intra-op thread per rank. Started by hand it forks
// --nproc ranks (distcomm::spawn); under tools/launch it is one rank.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gflags/gflags.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include "api/init.h"
#include "api/run_main.h"
#include "api/process/spawn.h"
#include "integrations/torch/distributed_data_parallel.h"

DEFINE_int32(nproc, 2, "ranks to fork when started by hand");
DEFINE_string(backend, "", "backend (default: $DISTCOMM_BACKEND, else init_process_group's default, auto)");
DEFINE_int32(layers, 8, "Linear(width, width) + ReLU layers");
DEFINE_int32(width, 1024, "layer width (8 x 1024 is 8.4M parameters)");
DEFINE_int32(batch, 64, "samples per rank per iteration");
DEFINE_int32(iters, 20, "timed iterations");
DEFINE_int32(warmup, 3, "untimed iterations first (DDP rebuilds its buckets in the first)");
DEFINE_double(bucket_cap_mb, 25, "DDP bucket cap in MiB");

namespace {

using Clock = std::chrono::steady_clock;

std::shared_ptr<torch::nn::SequentialImpl> make_model() {
  torch::manual_seed(0);
  auto model = std::make_shared<torch::nn::SequentialImpl>();
  for (int i = 0; i < FLAGS_layers; ++i) {
    model->push_back(torch::nn::Linear(FLAGS_width, FLAGS_width));
    model->push_back(torch::nn::ReLU());
  }
  return model;
}

double max_over_ranks(distcomm::ProcessGroup& pg, double value) {
  distcomm::Tensor t = distcomm::Tensor::of<double>({value});
  distcomm::AllReduceOptions max;
  max.op = distcomm::ReduceOp::MAX;
  pg.all_reduce(t, max)->wait();
  return t.item();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One training copy: a model, its optimizer, and DDP or not.
struct Copy {
  std::shared_ptr<torch::nn::SequentialImpl> model = make_model();
  torch::optim::SGD sgd{model->parameters(), torch::optim::SGDOptions(1e-3)};
  std::unique_ptr<distcomm::torch::DistributedDataParallel> ddp;
  std::vector<double> times_ms;
  double comm_ms = 0, overlapped_ms = 0, wait_ms = 0;  // sums over timed iterations

  void step(const at::Tensor& x, const at::Tensor& y, bool timed) {
    const Clock::time_point start = Clock::now();
    sgd.zero_grad();
    torch::nn::functional::mse_loss(model->forward(x), y).backward();
    sgd.step();
    if (!timed) return;
    times_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    if (!ddp) return;
    const distcomm::ddp::IterationStats& s = ddp->last_stats();
    comm_ms += s.comm_ms;
    overlapped_ms += s.overlapped_ms;
    wait_ms += s.wait_ms;
  }
};

void run_rank() {
  at::set_num_threads(1);
  distcomm::InitOptions init;
  init.backend = FLAGS_backend;
  distcomm::ProcessGroupPtr pg = distcomm::init_process_group(init);
  torch::manual_seed(static_cast<uint64_t>(1 + pg->rank()));
  const at::Tensor x = at::randn({FLAGS_batch, FLAGS_width}), y = at::randn({FLAGS_batch, FLAGS_width});
  Copy local, distributed;
  distcomm::torch::DdpOptions options;
  options.bucket_cap_mb = FLAGS_bucket_cap_mb;
  distributed.ddp = std::make_unique<distcomm::torch::DistributedDataParallel>(*pg, distributed.model, options);
  pg->barrier()->wait();
  for (int it = 0; it < FLAGS_warmup + FLAGS_iters; ++it) {
    const bool timed = it >= FLAGS_warmup;
    // Untimed barriers: each step starts with the ranks together, as in training; the local
    // step never synchronises them, and a rank's lead from it would otherwise be waited out
    // inside the DDP step and counted as exposed communication (torch_ddp_bench.py alike).
    pg->barrier()->wait();
    local.step(x, y, timed);
    pg->barrier()->wait();
    distributed.step(x, y, timed);
  }
  const double local_ms = max_over_ranks(*pg, median(local.times_ms));
  const double ddp_ms = max_over_ranks(*pg, median(distributed.times_ms));
  const double comm_ms = max_over_ranks(*pg, distributed.comm_ms / FLAGS_iters);
  const double overlapped_ms = max_over_ranks(*pg, distributed.overlapped_ms / FLAGS_iters);
  const double wait_ms = max_over_ranks(*pg, distributed.wait_ms / FLAGS_iters);
  if (pg->rank() != 0) return;
  int64_t params = 0;
  for (const at::Tensor& p : local.model->parameters()) params += p.numel();
  std::printf("impl=distcomm_torch_ddp nproc=%d params=%lld bucket_mb=%g batch=%d local_ms=%.2f ddp_ms=%.2f "
              "exposed_ms=%.2f comm_ms=%.2f overlapped_ms=%.2f waited_ms=%.2f buckets=%zu\n",
              pg->size(), static_cast<long long>(params), FLAGS_bucket_cap_mb, FLAGS_batch, local_ms, ddp_ms,
              ddp_ms - local_ms, comm_ms, overlapped_ms, wait_ms, distributed.ddp->buckets().size());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage("libtorch training step with distcomm's DDP vs without communication");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  return distcomm::run_main("torch_ddp_bench", [] {
    distcomm::SpawnOptions options;
    options.backend = FLAGS_backend;
    distcomm::run_as_rank_or_spawn(FLAGS_nproc, run_rank, options);
    return 0;
  });
}
