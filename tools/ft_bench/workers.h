// The two kinds of worker process ft_bench starts (itself, with --worker=ft or
// --worker=restart): the same training, surviving a failure in-process (ft::Manager) or by
// the launcher's restart from a checkpoint.
#pragma once

#include <cstdint>
#include <string>

#include "tools/ft_bench/training.h"

namespace distcomm {
namespace ft_bench {

struct WorkerConfig {
  TrainingShape shape;
  int64_t steps = 40;
  int kill_rank = -1;       // the victim's first rank; -1: nobody dies
  int64_t kill_step = 20;   // it SIGKILLs itself during this step's backward
  std::string log_dir;      // event logs (event_log.h), and the restart path's checkpoint
  int64_t checkpoint_every = 10;  // restart path only
  double heartbeat_timeout_s = 3;
};

// Trains under ft::Manager (member id and joining from the environment, as ft_bench sets
// them). Returns the exit code.
int run_ft_worker(const WorkerConfig& config);
// Trains over init_process_group's world, checkpointing every checkpoint_every steps
// (rank 0 writes it) and resuming from the checkpoint in a restarted attempt.
int run_restart_worker(const WorkerConfig& config);

}  // namespace ft_bench
}  // namespace distcomm
