// Running a whole job: start the ranks, carry their output, watch them, stop them.
#pragma once

#include <string>

#include "launch/launch_options.h"

namespace distcomm {
namespace launch {

struct JobResult {
  // What the launcher should exit with: 0 when every rank exited 0; else the exit code of
  // the rank that failed first (128 + signal number for a signal); 128 + signal when the
  // launcher itself was interrupted.
  int exit_code = 0;
  // The rank that failed first, -1 if none: by the time in its error file (the ranks get
  // DISTCOMM_ERROR_FILE; run_main writes it), else the first seen failing. In a cascade
  // the rank that failed first is the cause, even when another one's exit was seen first.
  int failed_rank = -1;
  std::string failure;      // "rank 1 (local rank 1, pid 7) failed: exit code 3", "" if none
  int interrupted_by = 0;   // SIGINT/SIGTERM/SIGHUP that stopped the job, 0 if none
  int master_port = 0;      // the port every rank was given
};

// Starts options.nproc_per_node ranks of options.command, each with its rank in the
// environment, and pumps their output line by line until they have all exited. When a
// rank exits non-zero or dies on a signal, or the launcher gets SIGINT/SIGTERM/SIGHUP, it
// says so on stderr ("<tag>: ...") and stops every rank's process group: SIGTERM, then
// SIGKILL after options.grace_period (at once on a second Ctrl-C). Every rank is reaped
// before it returns: no zombie is left.
//
// Throws std::invalid_argument for bad options and std::runtime_error when the job cannot
// start; in both cases no rank is left running.
JobResult run_job(const LaunchOptions& options);

}  // namespace launch
}  // namespace distcomm
