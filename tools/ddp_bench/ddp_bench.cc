// ddp_bench: what DistributedDataParallel costs and what bucketing buys.
//
//   $ bazel run -c opt //tools/ddp_bench -- --nproc=2
//
// Every rank trains the same MLP (a few million parameters) on its own batch. The first
// row runs forward, backward and the SGD step with no communication at all ("local": the
// same per-rank work); the next rows add DDP with bucket caps from 0 MiB (one all_reduce
// per parameter) up to a single bucket (communication can only start after backward).
// Times are the median iteration of each rank, the slowest rank reported; the rows take
// turns iteration by iteration, so a busy machine slows them alike, and every iteration
// starts after an untimed barrier, so that no row inherits the ranks' skew from the one before;
// the wait at the barrier after a local step is printed last: how far apart the ranks' local
// steps end, which a synchronous step waits for before any communication. The second row,
// "local + barrier", is that synchronous step: the local one with a barrier where DDP waits
// for its buckets, so a DDP row minus it is what moving the gradients adds, apart from the
// host's unevenness (which on a VM can be larger than the communication itself). Started by hand
// it forks --nproc ranks (distcomm::spawn); under tools/launch or mpirun it is one rank.
// --find_unused_parameters and --comm_hook (default, fp16, bf16, user: an averaging hook DDP
// cannot tell from any other) apply to every DDP row.
#include <gflags/gflags.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "api/errors.h"
#include "api/init.h"
#include "api/run_main.h"
#include "api/process/spawn.h"
#include "ddp/comm_hooks.h"
#include "ddp/distributed_data_parallel.h"
#include "ddp/message_format.h"
#include "examples/nn/loss.h"
#include "examples/nn/sequential.h"
#include "examples/nn/sgd.h"
#include "examples/nn/synthetic_data.h"

DEFINE_int32(nproc, 2, "ranks to fork when started by hand");
DEFINE_string(backend, "gloo", "backend");
DEFINE_int32(layers, 8, "hidden Linear layers of width x width");
DEFINE_int32(width, 640, "hidden width (8 x 640 is about 3.3M parameters)");
DEFINE_int32(in_width, 64, "input features (the first Linear is in_width x width)");
DEFINE_int32(out_width, 16, "outputs (the last Linear is width x out_width)");
DEFINE_int32(batch, 16, "samples per rank per iteration");
DEFINE_int32(iters, 20, "timed iterations per row");
DEFINE_int32(warmup, 3, "untimed iterations per row (DDP rebuilds its buckets in the first)");
DEFINE_string(config, "", "backend settings K=V,... (docs/environment.md's keys), e.g. shm_nap_us=200");
DEFINE_string(caps, "0,0.25,1,4,25,one", "bucket_cap_mb values; 'one' is a single bucket");
DEFINE_bool(find_unused_parameters, false, "DDP's find_unused_parameters (every parameter is still used)");
DEFINE_string(comm_hook, "default", "default, fp16, bf16, or user: an averaging hook of the program's own");

namespace {

using distcomm::Tensor;
namespace ddp = distcomm::ddp;
using Clock = std::chrono::steady_clock;

struct RowResult {
  double median_ms = 0;
  size_t buckets = 0;
  double comm_ms = 0, overlapped_ms = 0, wait_ms = 0;  // means over timed iterations
};

std::vector<int64_t> model_widths() {
  std::vector<int64_t> widths = {FLAGS_in_width};
  for (int i = 0; i < FLAGS_layers; ++i) widths.push_back(FLAGS_width);
  widths.push_back(FLAGS_out_width);
  return widths;
}

// The slowest rank's value (every rank gets it).
double max_over_ranks(distcomm::ProcessGroup& pg, double value) {
  Tensor t = Tensor::of<double>({value});
  distcomm::AllReduceOptions max;
  max.op = distcomm::ReduceOp::MAX;
  pg.all_reduce(t, max)->wait();
  return t.item();
}

// One row of the table: a model of its own, with DDP or without.
class Row {
 public:
  // ddp_options null: no DDP, no communication at all; with `synchronous`, a barrier where
  // DDP would wait for its buckets (after backward): the step's wait for the slowest rank,
  // with no bytes to move.
  Row(distcomm::ProcessGroup& pg, const ddp::DdpOptions* ddp_options, bool synchronous = false)
      : pg_(pg),
        synchronous_(synchronous),
        model_(nn::make_mlp(model_widths(), /*seed=*/1)),
        sgd_(model_->parameters(), 1e-3f),
        data_(nn::make_regression(FLAGS_batch, FLAGS_in_width, FLAGS_out_width, /*seed=*/pg.rank() + 1)) {
    if (!ddp_options) return;
    std::vector<ddp::NamedParameter> params;
    for (nn::Parameter* p : model_->parameters()) params.push_back({p->name, &p->value, &p->grad});
    ddp_ = std::make_unique<ddp::DistributedDataParallel>(pg, params, *ddp_options);
    hook_ = [this](size_t i) { ddp_->mark_grad_ready(i); };
  }

  void iteration(bool timed) {
    const Clock::time_point start = Clock::now();
    sgd_.zero_grad();
    Tensor out = model_->forward(data_.inputs);
    model_->backward(nn::mse_loss(out, data_.targets).grad, hook_);
    if (ddp_) ddp_->finish_backward();
    if (synchronous_) pg_.barrier()->wait();
    sgd_.step();
    if (!timed) return;
    times_.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    if (!ddp_) return;
    const ddp::IterationStats& s = ddp_->last_stats();
    result_.buckets = s.bucket_bytes.size();
    result_.comm_ms += s.comm_ms / FLAGS_iters;
    result_.overlapped_ms += s.overlapped_ms / FLAGS_iters;
    result_.wait_ms += s.wait_ms / FLAGS_iters;
  }

  // Collective: the slowest rank's numbers.
  RowResult result(distcomm::ProcessGroup& pg) {
    std::sort(times_.begin(), times_.end());
    RowResult r = result_;
    r.median_ms = max_over_ranks(pg, times_[times_.size() / 2]);
    r.comm_ms = max_over_ranks(pg, r.comm_ms);
    r.overlapped_ms = max_over_ranks(pg, r.overlapped_ms);
    r.wait_ms = max_over_ranks(pg, r.wait_ms);
    return r;
  }

 private:
  distcomm::ProcessGroup& pg_;
  const bool synchronous_;
  std::unique_ptr<nn::Sequential> model_;
  nn::Sgd sgd_;
  nn::Dataset data_;
  std::unique_ptr<ddp::DistributedDataParallel> ddp_;
  nn::GradReadyHook hook_;
  std::vector<double> times_;
  RowResult result_;
};

ddp::CommHook comm_hook_from_flag() {
  if (FLAGS_comm_hook == "default") return {};
  if (FLAGS_comm_hook == "fp16") return ddp::fp16_compress_hook();
  if (FLAGS_comm_hook == "bf16") return ddp::bf16_compress_hook();
  if (FLAGS_comm_hook == "user") {
    // What the default does, written as a user would: DDP cannot tell it from any other hook.
    return [](distcomm::ProcessGroup& pg, ddp::GradBucket& bucket) {
      distcomm::AllReduceOptions avg;
      avg.op = distcomm::ReduceOp::AVG;
      return pg.all_reduce(bucket.buffer, avg);
    };
  }
  throw distcomm::InvalidArgument("--comm_hook: '" + FLAGS_comm_hook + "' is not default, fp16, bf16 or user");
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> caps;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) caps.push_back(item);
  return caps;
}

void run_rank() {
  distcomm::InitOptions init;
  init.backend = FLAGS_backend;
  for (const std::string& pair : split_commas(FLAGS_config)) {
    const size_t eq = pair.find('=');
    if (eq == std::string::npos || eq == 0) throw distcomm::InvalidArgument("--config: '" + pair + "' is not K=V");
    init.backend_config[pair.substr(0, eq)] = pair.substr(eq + 1);
  }
  distcomm::ProcessGroupPtr pg = distcomm::init_process_group(init);
  auto probe = nn::make_mlp(model_widths(), 1);
  int64_t params = 0;
  for (nn::Parameter* p : probe->parameters()) params += p->value.numel();
  const bool print = pg->rank() == 0;
  if (print) {
    std::printf("ddp_bench: %d ranks (%s%s%s), MLP %d-%dx%d-%d: %.2fM parameters (%s of float32 gradients), "
                "batch %d per rank, median of %d iterations after %d warm-up; comm hook %s%s\n\n",
                pg->size(), pg->backend_name().c_str(), FLAGS_config.empty() ? "" : "; ",
                FLAGS_config.c_str(), FLAGS_in_width, FLAGS_layers, FLAGS_width, FLAGS_out_width,
                params / 1e6,
                ddp::format_bytes(4.0 * params).c_str(), FLAGS_batch, FLAGS_iters, FLAGS_warmup,
                FLAGS_comm_hook.c_str(), FLAGS_find_unused_parameters ? ", find_unused_parameters" : "");
    std::printf("%-26s %7s %10s %9s %9s %11s %9s\n", "mode", "buckets", "iter ms", "vs local", "comm ms",
                "overlapped", "waited ms");
  }
  // The rows take turns, one iteration each, so that a change in the machine's load
  // (other processes, frequency) affects every row alike.
  const std::vector<std::string> caps = split_commas(FLAGS_caps);
  std::vector<std::unique_ptr<Row>> rows;
  rows.push_back(std::make_unique<Row>(*pg, nullptr));
  rows.push_back(std::make_unique<Row>(*pg, nullptr, /*synchronous=*/true));
  for (const std::string& cap : caps) {
    ddp::DdpOptions options;
    options.bucket_cap_mb = cap == "one" ? 1e6 : std::atof(cap.c_str());
    if (cap == "one") options.first_bucket_cap_mb = 1e6;
    options.find_unused_parameters = FLAGS_find_unused_parameters;
    options.comm_hook = comm_hook_from_flag();
    rows.push_back(std::make_unique<Row>(*pg, &options));
  }
  pg->barrier()->wait();
  double drift_ms = 0;  // summed over timed iterations: this rank's wait after its local step
  for (int it = 0; it < FLAGS_warmup + FLAGS_iters; ++it) {
    for (size_t i = 0; i < rows.size(); ++i) {
      // Untimed: every row's iteration starts with the ranks together. The local row never
      // synchronises them, so without this a rank's lead from a local iteration (tens of ms
      // on a busy VM) was waited out inside the next DDP iteration and counted as exposed
      // communication. In training the ranks start each step together, as here.
      const Clock::time_point before = Clock::now();
      pg->barrier()->wait();
      if (i == 1 && it >= FLAGS_warmup) drift_ms += std::chrono::duration<double, std::milli>(Clock::now() - before).count();
      rows[i]->iteration(/*timed=*/it >= FLAGS_warmup);
    }
  }
  const RowResult local = rows[0]->result(*pg);
  const RowResult synchronous = rows[1]->result(*pg);
  if (print) {
    std::printf("%-26s %7s %10.1f %9s %9s %11s %9s\n", "local (no communication)", "-", local.median_ms, "-", "-", "-",
                "-");
    std::printf("%-26s %7s %10.1f %+8.1f%% %9s %11s %9s\n", "local + barrier", "-", synchronous.median_ms,
                100 * (synchronous.median_ms / local.median_ms - 1), "-", "-", "-");
  }
  for (size_t i = 0; i < caps.size(); ++i) {
    const RowResult r = rows[i + 2]->result(*pg);
    if (!print) continue;
    const std::string mode = caps[i] == "one" ? "DDP, one bucket" : "DDP, bucket_cap_mb=" + caps[i];
    const double overlap = r.comm_ms > 0 ? 100 * r.overlapped_ms / r.comm_ms : 0;
    std::printf("%-26s %7zu %10.1f %+8.1f%% %9.1f %10.0f%% %9.1f\n", mode.c_str(), r.buckets, r.median_ms,
                100 * (r.median_ms / local.median_ms - 1), r.comm_ms, overlap, r.wait_ms);
  }
  // How unevenly the host runs the ranks with no communication at all: a synchronous step
  // waits for its slowest rank, so a DDP row's "waited ms" (and part of its time over the
  // local row's) is this much before any communication counts.
  const double drift = max_over_ranks(*pg, drift_ms / FLAGS_iters);
  if (print) {
    std::printf("\nlocal steps end %.1f ms apart (the mean wait at the barrier after one, the larger rank's): what a "
                "synchronous step waits for here with no communication (the local + barrier row)\n",
                drift);
  }
  if (print) std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage("DDP iteration time vs no communication, across bucket caps");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  return distcomm::run_main("ddp_bench", [] {
    distcomm::SpawnOptions options;
    options.backend = FLAGS_backend;
    distcomm::run_as_rank_or_spawn(FLAGS_nproc, run_rank, options);
    return 0;
  });
}
