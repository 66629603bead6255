#include "tools/ft_bench/workers.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <thread>

#include "api/errors.h"
#include "api/init.h"
#include "api/run_main.h"
#include "api/store/prefix_store.h"
#include "api/store/tcp_store.h"
#include "ddp/distributed_data_parallel.h"
#include "ft/manager.h"
#include "ft/store_keys.h"
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

// The victim of a kill once arrived (WorkerConfig::kill_once_arrived): a thread with its own
// store connection watches generation g's arrivals and SIGKILLs this process as soon as
// `me` is among them, while the caller's thread goes on forming g (its group's creation).
void die_once_arrived(const std::string& me, uint64_t g, int64_t step, const std::string& log_dir) {
  const LaunchEnv launch = read_launch_env();
  TCPStoreOptions so;
  so.host = launch.master_addr;
  so.port = launch.master_port;
  so.identity = identity_from_environment();
  auto store = std::make_shared<PrefixStore>(ft::keys::kRoot, std::make_shared<TCPStore>(so));
  auto log = std::make_shared<EventLog>(log_dir, me);  // its own: the caller's may end first
  std::thread([store, log, me, g, step] {
    for (int64_t seen = 0;;) {
      const int64_t count = store->add(ft::keys::arrivals(g), 0);
      while (seen < count && store->check({ft::keys::arrival(g, seen + 1)})) {
        if (store->get_string(ft::keys::arrival(g, ++seen)) == me) {
          log->write("kill " + std::to_string(step) + " " + std::to_string(wall_ns()) + " in recovery, arrived at generation " +
                    std::to_string(g));
          ::raise(SIGKILL);
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }).detach();
}

}  // namespace

std::vector<Kill> parse_kills(const std::string& text) {
  std::vector<Kill> out;
  size_t from = 0;
  while (from <= text.size() && !text.empty()) {
    const size_t comma = text.find(',', from);
    const std::string item = text.substr(from, comma == std::string::npos ? std::string::npos : comma - from);
    const size_t at = item.rfind('@');
    const std::string step = at == std::string::npos ? "" : item.substr(at + 1);
    if (at == 0 || at == std::string::npos || step.empty() || step.size() > 12 ||
        step.find_first_not_of("0123456789") != std::string::npos) {
      throw InvalidArgument("ft_bench: --kills: '" + item + "' is not member@step (e.g. rank2@10)");
    }
    out.push_back({item.substr(0, at), std::stoll(step)});
    if (comma == std::string::npos) break;
    from = comma + 1;
  }
  return out;
}

std::string format_kills(const std::vector<Kill>& kills) {
  std::string s;
  for (const Kill& k : kills) s += (s.empty() ? "" : ",") + k.member + "@" + std::to_string(k.step);
  return s;
}

int run_ft_worker(const WorkerConfig& config) {
  ft::ManagerOptions options;
  options.heartbeat_timeout = std::chrono::milliseconds(static_cast<int64_t>(config.heartbeat_timeout_s * 1000));
  options.op_timeout = std::chrono::seconds(60);
  options.recovery_timeout = std::chrono::seconds(30);
  Training training(config.shape);
  options.state_signature = training.signature();
  std::unique_ptr<ft::Manager> manager;
  try {
    manager = std::make_unique<ft::Manager>(options);
  } catch (const InvalidArgument&) {
    // A joiner refused (its state differs): the line names the exception's type, for
    // ft_bench's check of a refused joiner.
    std::fprintf(stderr, "ft_bench worker: %s\n", type_and_message(std::current_exception()).c_str());
    return 1;
  }
  ft::Manager& ft = *manager;
  EventLog log(config.log_dir, ft.id());
  const bool joiner = env("DISTCOMM_FT_JOIN") == "1";
  Victim victim;
  for (const Kill& k : config.kills) {
    if (k.member == ft.id() && !victim.armed) {
      victim.armed = true;
      victim.step = k.step;
    }
  }
  victim.log = &log;
  bool dies_in_recovery = !config.kill_in_recovery.empty() && config.kill_in_recovery == ft.id();

  std::vector<Tensor*> state;
  for (nn::Parameter* p : training.parameters()) state.push_back(&p->value);
  std::unique_ptr<ddp::DistributedDataParallel> ddp_model;
  // Whether to stop now: every member of a generation decides the same, since they have
  // the same committed steps and took part in the same generations (the one replacement
  // comes after the first members, and sees itself).
  bool joiner_seen = false;
  auto finished = [&] {
    const int64_t committed = static_cast<int64_t>(ft.committed_steps());
    if (committed < config.steps) return false;
    return !config.await_joiner || joiner_seen || committed >= 10 * config.steps;
  };
  bool first_step = true;
  while (!finished()) {
    ProcessGroupPtr pg = ft.begin_step(state);
    const auto step_began = std::chrono::steady_clock::now();
    for (const std::string& id : ft.generation().members) joiner_seen = joiner_seen || id.find('+') != std::string::npos;
    const int64_t step = static_cast<int64_t>(ft.committed_steps());
    if (joiner && first_step) {
      log.write("joined " + std::to_string(step) + " " + std::to_string(wall_ns()));
      // The state begin_step gave it, before a DDP (which copies its rank 0's parameters)
      // could hide a transfer that went wrong.
      log.write("state " + std::to_string(step) + " " + training.checksum());
    }
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
      if (config.step_ms > 0) std::this_thread::sleep_until(step_began + std::chrono::milliseconds(config.step_ms));
    } catch (const Error& e) {
      ft.step_failed(e.what());
    }
    if (ft.commit()) {
      training.apply();
      log.write("commit " + std::to_string(step) + " " + std::to_string(wall_ns()));
      log.write("sum " + std::to_string(step) + " " + training.checksum());
    } else {
      const ft::FailureEvent& f = ft.failures().back();
      log.write("abort " + std::to_string(step) + " " + std::to_string(wall_ns(f.noticed)) + " " + f.why);
      ddp_model.reset();  // it belongs to the aborted group
      if (dies_in_recovery) {
        dies_in_recovery = false;  // after its first aborted step only
        if (config.kill_once_arrived) {
          die_once_arrived(ft.id(), ft.generation().number + 1, step, config.log_dir);
        } else {
          log.write("kill " + std::to_string(step) + " " + std::to_string(wall_ns()) + " in recovery");
          ::raise(SIGKILL);
        }
      }
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
    log.write("sum " + std::to_string(step) + " " + training.checksum());
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
