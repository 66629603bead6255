// One attempt at a job on this machine: start its ranks, carry their output, watch them,
// stop them. run_job (job.h) runs attempts one after another when restarts are allowed;
// the elastic agent (elastic_agent.h) runs one per rendezvous round.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "launch/launch_options.h"
#include "launch/signal_watch.h"

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
  std::string how;          // how that rank ended: "exit code 3", "signal SIGKILL (Killed)"
  int interrupted_by = 0;   // SIGINT/SIGTERM/SIGHUP/SIGQUIT that stopped the job, 0 if none
  // SIGINT/SIGTERM/SIGHUP/SIGQUIT that came while the attempt was already stopping (after a
  // failure or a stop request): nothing may start after it.
  int signal_while_stopping = 0;
  // Why an AttemptWatch stopped the attempt (or the round had ended before its first failed
  // rank was seen), "" if it did not: the ranks' failures are then its consequences.
  std::string stopped_for;
  int master_port = 0;      // the port every rank was given
  // When the launcher saw the first rank fail (or the watch ask): where a restart's time counts from.
  std::chrono::steady_clock::time_point stop_began;
  // Where the last attempt's ranks of this machine were in the job, for the launcher's last
  // line (job_outcome.h). local_ranks 0: none of this machine's ran (an elastic job that
  // finished before it joined).
  int first_rank = 0;
  int local_ranks = 0;
  int world_size = 0;
  int node_rank = 0;
  int nnodes = 1;
  int round = 0;     // the elastic round the ranks ran in; 0 in a static job
  int restarts = 0;  // the job's restarts before its last attempt
  // What the job went on after, oldest first, as the last line says it: "rank 3 failed
  // (exit code 1) and was restarted", "node 1 (ranks 2-3 on host-b, launcher pid 7) was
  // lost, last seen 4.1 s into the job".
  std::vector<std::string> survived;
  // Node 0 of a static job across machines whose ranks exited 0 here (node_roll_call.h):
  // whether every other machine's launcher said that its ranks exited 0 too (or, in a
  // fault-tolerant job, the job went on without the machines lost: survived): only then did
  // the job succeed; and what the others did instead ("node 1's ranks failed ...").
  bool others_clean = false;
  std::vector<std::string> others_not_clean;
};

// Something outside the attempt that may ask it to stop its ranks (the elastic agent: a
// machine went away, a new round began). fd is polled beside the ranks' output; once it is
// readable, reason() says why ("" means not yet: keep going). on_stop, when set, hears why
// the attempt itself begins to stop -- its first failed rank (failed_rank, how, exit_code)
// or a signal (interrupted_by) -- before any rank is stopped: the elastic agent tells the
// other machines first, so that the cause reaches them before its effects. For a failed rank
// it returns why the round had already ended when that was something else (a machine went
// away: "round 1 ended: ..."), "" when the failure is the cause: the attempt then takes that
// end as its stopped_for, and its ranks' failures as consequences, not as what failed first.
struct AttemptWatch {
  int fd = -1;
  std::function<std::string()> reason;
  std::function<std::string(const JobResult& cause)> on_stop;
  // When set and true as the attempt says how a stopping signal stopped it: the launcher's
  // last line comes after the attempt and gives the exit status (the elastic launcher that
  // serves the rendezvous store, which stops the whole job), so the attempt's gives none.
  std::function<bool()> exit_status_said_after;
};

// Starts options.nproc_per_node ranks of options.command, each with its rank in the
// environment, and pumps their output line by line until they have all exited. With
// options.serve_store, node 0's launcher serves the attempt's store from before the first
// rank starts until every rank was reaped (job_store.h); when that store finds that the job
// cannot run (JobStore::doomed), the ranks are stopped and the result is exit code 1,
// with no failed rank (so no restart), its last line saying why. When a
// rank exits non-zero or dies on a signal, the launcher gets SIGINT/SIGTERM/SIGHUP/SIGQUIT (through
// `signals`), or `watch` asks, it says so on stderr ("<tag>: ...") and stops every rank's
// process group: SIGTERM (the launcher's own stopping signal, passed on, when that is what
// stopped it: SIGINT for a Ctrl-C, as torchrun's agent does), then SIGKILL after
// options.grace_period (at once on a second Ctrl-C); but a failed rank under OnFailure::kContinue is said in one line and the others
// run on. Every rank is reaped, and the attempt's error files removed, before it returns.
//
// Throws std::runtime_error when the ranks cannot start; no rank is left running then.
JobResult run_attempt(const LaunchOptions& options, SignalWatch& signals, const AttemptWatch* watch = nullptr);

}  // namespace launch
}  // namespace distcomm
