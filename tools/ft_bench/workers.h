// The two kinds of worker process ft_bench starts (itself, with --worker=ft or
// --worker=restart): the same training, surviving a failure in-process (ft::Manager) or by
// the launcher's restart from a checkpoint.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tools/ft_bench/training.h"

namespace distcomm {
namespace ft_bench {

// A member that SIGKILLs itself during a step's backward (the first try of that step it
// takes part in).
struct Kill {
  std::string member;  // "rank2", or a replacement's "rank2+1"
  int64_t step = 0;
};
// "rank2@10,rank1@14" (member@step, comma-separated); throws InvalidArgument naming a bad one.
std::vector<Kill> parse_kills(const std::string& text);
std::string format_kills(const std::vector<Kill>& kills);

struct WorkerConfig {
  TrainingShape shape;
  int64_t steps = 40;
  int kill_rank = -1;       // the restart path's victim (the first kill's rank); -1: nobody dies
  int64_t kill_step = 20;   // it SIGKILLs itself during this step's backward
  // The ft workers' victims, in order (the first is kill_rank@kill_step).
  std::vector<Kill> kills;
  // ft workers: this member SIGKILLs itself right after its first commit() that returned
  // false (the others are forming the next generation), or, with kill_once_arrived, once it
  // has arrived at that next generation (while its group is being created). "": nobody.
  std::string kill_in_recovery;
  bool kill_once_arrived = false;
  // ft workers: the first members do not stop at `steps` before a replacement has been a
  // member (an id with '+'), and stop at 10 x steps in any case.
  bool await_joiner = false;
  // ft workers: a step that went well takes at least this long (padded before its commit),
  // so that a job of few small steps still lasts long enough for a joiner to come. 0: none.
  int step_ms = 0;
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
