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
  double rejoin_after_s = -1;  // < 0: no replacement (of the first kill's victim)
  // The in-process run: start a joiner whose state differs (its width is one more) this
  // long after the job starts; it must be refused, and the job goes on. < 0: none.
  double refused_joiner_after_s = -1;
  double time_limit_s = 300;   // a run that takes longer is stopped and reported failed
};

struct RunOutcome {
  std::string name;
  std::string log_dir;
  bool ok = false;
  std::string error;  // why not ok
  double wall_s = 0;
  bool in_process = true;  // ft::Manager's run (false: the restart path's)
  // The refused joiner, if one was started: its wait status, the line of its stderr that
  // says why it was refused ("" if none), and whether that line is right (an
  // InvalidArgument naming both signatures, and a non-zero exit).
  bool refused_started = false;
  std::string refused_exit;
  std::string refused_message;
  bool refused_as_expected = false;
  int64_t refused_ended_ns = 0;  // wall clock, when this process saw it end
};

// The in-process path: this process serves the job's store (so that any rank may die),
// starts nproc workers of itself (--worker=ft), and when the victim has died starts its
// replacement after rejoin_after_s. The victims' SIGKILLs are expected (and a victim that
// does not die is a failure), the refused joiner's non-zero exit too; any other failure is not.
RunOutcome run_ft_job(const BenchConfig& config, const std::string& name, bool with_failure);
// The restart path: the launcher library (as tools/launch --max_restarts=1) runs nproc
// workers of itself (--worker=restart).
RunOutcome run_restart_job(const BenchConfig& config);

// The worker flags that reproduce `config` in a child.
std::vector<std::string> worker_arguments(const WorkerConfig& config, const std::string& kind);

}  // namespace ft_bench
}  // namespace distcomm
