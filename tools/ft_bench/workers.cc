#include "tools/ft_bench/workers.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>

#include "api/errors.h"
#include "api/init.h"
#include "ddp/distributed_data_parallel.h"
#include "ft/manager.h"
#include "tools/ft_bench/event_log.h"

namespace distcomm {
namespace ft_bench {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::vector<ddp::NamedParameter> named(Training& training) {
  std::vector<ddp::NamedParameter> out;
  for (nn::Parameter* p : training.parameters()) out.push_back({p->name, &p->value, &p->grad});
  return out;
}

// The victim dies during backward, after its first gradient is handed to DDP: its peers
// are in (or about to be in) the step's all_reduce, as when a machine fails mid-step.
struct Victim {
  bool armed = false;
  EventLog* log = nullptr;
  int64_t step = 0;
  void maybe_die(int64_t now) {
    if (!armed || now != step) return;
    log->write("kill " + std::to_string(step) + " " + std::to_string(wall_ns()));
    ::raise(SIGKILL);
  }
};

}  // namespace

int run_ft_worker(const WorkerConfig& config) {
  ft::ManagerOptions options;
  options.heartbeat_timeout = std::chrono::milliseconds(static_cast<int64_t>(config.heartbeat_timeout_s * 1000));
  options.op_timeout = std::chrono::seconds(60);
  options.recovery_timeout = std::chrono::seconds(30);
  Training training(config.shape);
  options.state_signature = training.signature();
  ft::Manager ft(options);
  EventLog log(config.log_dir, ft.id());
  const bool joiner = env("DISTCOMM_FT_JOIN") == "1";
  Victim victim;
  victim.armed = !joiner && env("RANK") == std::to_string(config.kill_rank);
  victim.log = &log;
  victim.step = config.kill_step;

  std::vector<Tensor*> state;
  for (nn::Parameter* p : training.parameters()) state.push_back(&p->value);
  std::unique_ptr<ddp::DistributedDataParallel> ddp_model;
  bool first_step = true;
  while (static_cast<int64_t>(ft.committed_steps()) < config.steps) {
    ProcessGroupPtr pg = ft.begin_step(state);
    const int64_t step = static_cast<int64_t>(ft.committed_steps());
    if (joiner && first_step) log.write("joined " + std::to_string(step) + " " + std::to_string(wall_ns()));
    first_step = false;
    try {
      if (ft.group_changed() || !ddp_model) {
        ddp_model.reset();
        ddp::DdpOptions ddp_options;
        ddp_options.bucket_cap_mb = 0.25;  // several buckets: communication overlaps backward
        ddp_model = std::make_unique<ddp::DistributedDataParallel>(*pg, named(training), ddp_options);
      }
      const auto [begin, end] = ft::shard(config.shape.global_batch, pg->rank(), pg->size());
      training.forward_backward(step, begin, end, [&](size_t i) {
        ddp_model->mark_grad_ready(i);
        victim.maybe_die(step);
      });
      ddp_model->finish_backward();
    } catch (const Error& e) {
      ft.step_failed(e.what());
    }
    if (ft.commit()) {
      training.apply();
      log.write("commit " + std::to_string(step) + " " + std::to_string(wall_ns()));
    } else {
      const ft::FailureEvent& f = ft.failures().back();
      log.write("abort " + std::to_string(step) + " " + std::to_string(wall_ns(f.noticed)) + " " + f.why);
      ddp_model.reset();  // it belongs to the aborted group
    }
  }
  log.write("end " + std::to_string(ft.committed_steps()) + " " + training.checksum());
  ddp_model.reset();
  return 0;
}

int run_restart_worker(const WorkerConfig& config) {
  ProcessGroupPtr pg = init_process_group();
  Training training(config.shape);
  EventLog log(config.log_dir, "rank" + std::to_string(pg->rank()));
  const bool first_attempt = env("DISTCOMM_RESTART_COUNT").empty() || env("DISTCOMM_RESTART_COUNT") == "0";
  Victim victim;
  victim.armed = first_attempt && pg->rank() == config.kill_rank;
  victim.log = &log;
  victim.step = config.kill_step;

  // The checkpoint: the step to resume from, then every parameter's bytes.
  const std::string checkpoint = config.log_dir + "/checkpoint.bin";
  int64_t start = 0;
  if (std::ifstream in{checkpoint, std::ios::binary}) {
    in.read(reinterpret_cast<char*>(&start), sizeof(start));
    for (nn::Parameter* p : training.parameters()) {
      in.read(static_cast<char*>(p->value.data()), static_cast<std::streamsize>(p->value.nbytes()));
    }
    if (!in) throw Error("ft_bench: checkpoint " + checkpoint + " is short");
  }
  ddp::DdpOptions ddp_options;
  ddp_options.bucket_cap_mb = 0.25;
  ddp::DistributedDataParallel ddp_model(*pg, named(training), ddp_options);
  for (int64_t step = start; step < config.steps; ++step) {
    const auto [begin, end] = ft::shard(config.shape.global_batch, pg->rank(), pg->size());
    try {
      training.forward_backward(step, begin, end, [&](size_t i) {
        ddp_model.mark_grad_ready(i);
        victim.maybe_die(step);
      });
      ddp_model.finish_backward();
    } catch (const Error& e) {
      // This rank knows; the launcher stops it and starts the job again.
      log.write("abort " + std::to_string(step) + " " + std::to_string(wall_ns()) + " " + e.what());
      throw;
    }
    training.apply();
    log.write("commit " + std::to_string(step) + " " + std::to_string(wall_ns()));
    if (pg->rank() == 0 && (step + 1) % config.checkpoint_every == 0) {
      const std::string tmp = checkpoint + ".tmp";
      {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        const int64_t next = step + 1;
        out.write(reinterpret_cast<const char*>(&next), sizeof(next));
        for (nn::Parameter* p : training.parameters()) {
          out.write(static_cast<const char*>(p->value.data()), static_cast<std::streamsize>(p->value.nbytes()));
        }
        if (!out) throw Error("ft_bench: cannot write " + tmp);
      }
      if (std::rename(tmp.c_str(), checkpoint.c_str()) != 0) throw Error("ft_bench: cannot rename " + tmp);
    }
  }
  log.write("end " + std::to_string(config.steps) + " " + training.checksum());
  return 0;
}

}  // namespace ft_bench
}  // namespace distcomm
