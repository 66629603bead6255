// Running a whole job on this machine: its first attempt, and with --max_restarts the
// attempts that follow a failure.
#pragma once

#include <string>

#include "launch/attempt.h"
#include "launch/launch_options.h"

namespace distcomm {
namespace launch {

// Runs the job's first attempt (run_attempt). When a rank fails and options.max_restarts
// allows, the attempt's ranks are stopped as without restarts (trace dumps included), and
// the job starts again, up to max_restarts times, saying "<tag>: rank 3 failed (exit code
// 1); restart 1 of 3 in 0.4 s" (the time since the failure was seen). Each attempt is a new
// job to its ranks: a fresh identity and port (restart_identity), its own error files,
// and its logs and dumps beside the failed attempt's (attempt_options), never over them.
// After the last allowed restart fails, it says it gave up and returns that failure.
// SIGINT/SIGTERM/SIGHUP/SIGQUIT at any point ends the job: no restart follows.
//
// In a static job across machines with serve_store, a launcher other than node 0's first
// checks its --nnodes and --nproc_per_node against node 0's launcher's (JobStoreServer,
// waiting for node 0's store as its ranks would): when they differ, or that store cannot be
// reached, it starts no rank and returns exit code 1, its last line saying "<tag>: the job
// cannot run: node 0's launcher runs 2 nodes x 2 ranks per node, this one (node 1) was given
// 4 nodes x 1 rank per node (--nnodes, --nproc_per_node): give every launcher the same";
// node 0's launcher ends too, saying so (JobStore::doomed).
//
// Throws std::invalid_argument for bad options and std::runtime_error when the job cannot
// start; in both cases no rank is left running.
JobResult run_job(const LaunchOptions& options);

// The options of an attempt after `restarts` restarts. The first attempt's are the job's
// own; a later attempt writes its logs to <log_dir>/attempt_<n>/, its dumps to
// <trace_dir>/attempt_<n>/ and its timeline to <timeline stem>.attempt_<n><ext>, so that
// the failed attempt's evidence stays where it was.
LaunchOptions attempt_options(const LaunchOptions& job, int restarts);

// The identity of one attempt on a single machine, made here for every attempt: a fresh
// token (a rank of a failed attempt cannot authenticate to the next one's store) and run
// id. A run id the user gave names the first attempt, and "<it>-restart<n>" the later ones.
JobIdentity attempt_identity(const JobIdentity& given, int restarts);

}  // namespace launch
}  // namespace distcomm
