// The runs ft_bench compares: the training under ft::Manager with a rank killed (and a
// replacement, optionally), the same through the launcher's restart path, and with no
// failure. Each run gets a fresh folder for its event logs (event_log.h).
#pragma once

#include <string>
#include <vector>

#include "tools/ft_bench/workers.h"

namespace distcomm {
namespace ft_bench {

struct BenchConfig {
  int nproc = 4;
  std::string backend = "gloo";
  WorkerConfig worker;
  double rejoin_after_s = -1;  // < 0: no replacement
  double time_limit_s = 300;   // a run that takes longer is stopped and reported failed
};

struct RunOutcome {
  std::string name;
  std::string log_dir;
  bool ok = false;
  std::string error;  // why not ok
  double wall_s = 0;
};

// The in-process path: this process serves the job's store (so that any rank may die),
// starts nproc workers of itself (--worker=ft), and when the victim has died starts its
// replacement after rejoin_after_s. The victim's SIGKILL is expected; any other failure is not.
RunOutcome run_ft_job(const BenchConfig& config, const std::string& name, bool with_failure);
// The restart path: the launcher library (as tools/launch --max_restarts=1) runs nproc
// workers of itself (--worker=restart).
RunOutcome run_restart_job(const BenchConfig& config);

// The worker flags that reproduce `config` in a child.
std::vector<std::string> worker_arguments(const WorkerConfig& config, const std::string& kind);

}  // namespace ft_bench
}  // namespace distcomm
