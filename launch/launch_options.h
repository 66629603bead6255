// What a job launch needs: how many ranks, where they rendezvous, what they run and where
// their output goes. Filled from flags by tools/launch/main.cc and by examples/self_launch.cc.
//
// This library is plain POSIX and does not link the distcomm core, so that the launcher
// can start any program (including ones that are not distcomm programs at all).
#pragma once

#include <chrono>
#include <set>
#include <string>
#include <vector>

#include "api/process/job_identity.h"
#include "launch/job_store.h"

namespace distcomm {
namespace launch {

struct LaunchOptions {
  // The program and its arguments; every rank runs the same command. A program name
  // without '/' is looked up in $PATH, as a shell would.
  std::vector<std::string> command;
  // Ranks on this machine, and the job's shape across machines:
  // RANK = node_rank * nproc_per_node + LOCAL_RANK, WORLD_SIZE = nnodes * nproc_per_node.
  int nproc_per_node = 1;
  // torchrun's --role: the ranks' ROLE_NAME.
  std::string role = "default";
  int nnodes = 1;
  int node_rank = 0;
  // Where the job's store is served. Port 0: pick a free port once and hand it to every
  // rank (single machine only: other machines could not know it).
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  // When set, node 0's launcher serves the job's store there itself, from before its ranks
  // start until every one has ended, each attempt its own (job_store.h), and every
  // launcher tells its ranks so (DISTCOMM_STORE_SERVED_BY=launcher): rank 0 is then a client
  // like the others, and the store outlives any rank. tools/launch sets it for static jobs
  // (not with --serve_store=false). Unset (the self-launching examples, elastic rounds):
  // rank 0 serves the store.
  JobStoreServer serve_store;
  // Where that store listens, as rank 0's would: $DISTCOMM_STORE_BIND (JobStoreRequest::bind).
  std::string store_bind;
  // Exported as DISTCOMM_BACKEND when not empty.
  std::string backend;
  // Exported as DISTCOMM_RUN_ID and DISTCOMM_STORE_TOKEN. On one machine, what is empty
  // is made fresh for the job; across machines every launcher must be given the same.
  JobIdentity identity;
  // When not empty: each rank's output also goes to <log_dir>/rank_<R>.log (created), and
  // reaches the terminal only with tee.
  std::string log_dir;
  bool tee = false;
  // Global ranks whose output reaches the terminal; empty: all of them.
  std::set<int> ranks_filter;
  // Put "[rank R] " before each line on the terminal. Self-launching examples turn it off
  // so that their output reads exactly as the program printed it.
  bool prefix_output = true;  // except on lines that already start with "[rank N"
  // Between the stopping signal (SIGTERM, or the one that stopped the launcher) and SIGKILL
  // when the job is stopped.
  std::chrono::milliseconds grace_period{5000};
  // When not empty: exported as DISTCOMM_TRACE_DIR (absolute), so every rank dumps its
  // flight recorder there on a failure and at exit; and when a rank fails or the job is
  // stopped, the ranks still running are asked for a dump (SIGUSR1) and given up to
  // dump_wait to write it before they are stopped.
  std::string trace_dir;
  std::chrono::milliseconds dump_wait{5000};
  // Whether the command line gave dump_wait (--dump_wait_s): without a trace folder it
  // would do nothing, and is refused (validate).
  bool dump_wait_given = false;
  // Without trace_dir: the DISTCOMM_TRACE_DIR the ranks inherit from the launcher's
  // environment, if any. A rank dumps there by itself on SIGTERM only; when the launcher
  // passes on another signal (Ctrl-C's SIGINT), it asks for the dumps first (SIGUSR1), as
  // with trace_dir.
  std::string inherited_trace_dir;
  // When not empty: exported as DISTCOMM_TIMELINE (absolute); the file is removed first,
  // and the ranks merge their timelines into it (api/diagnostics/timeline.h). Its folder
  // must exist (validate).
  std::string timeline;
  // Ranks start in this folder when not empty (`bazel run` passes the user's folder).
  std::string working_dir;
  // What a rank's failure does to the others: kStop stops them (SIGTERM, then SIGKILL
  // after grace_period); kContinue leaves them running (each failure is said in one
  // line), for jobs whose ranks go on without a dead one. Either way the job exits with
  // the first failure's code.
  enum class OnFailure { kStop, kContinue };
  OnFailure on_failure = OnFailure::kStop;
  // With kContinue: this long after a rank fails, start a replacement for it (same RANK,
  // DISTCOMM_FT_JOIN=1, DISTCOMM_FT_MEMBER_ID=rank<R>+<n>) that joins the running job
  // (ft/manager.h), unless no rank runs any more. Then the job succeeds when every rank's
  // last process exited 0. Negative: no replacements.
  std::chrono::milliseconds replace_after{-1};
  // How many replacements one rank may have: a program that fails at once every time must
  // not become a fork loop.
  int max_replacements = 3;
  // After a rank fails, stop the others and start the job again, up to this many times,
  // each attempt with a fresh identity and store port (job.h). 0: a failure ends the job.
  int max_restarts = 0;
  // Node 0's launcher of a static job across machines, its ranks done: how long at most it
  // waits for the other machines' launchers to say how their ranks ended, and keeps the
  // job's store for them (one deadline for both: attempt.cc, tcp_job_store.cc).
  std::chrono::milliseconds other_machines_wait{30000};
  // Which attempt this is (0: the first): exported as DISTCOMM_RESTART_COUNT and
  // TORCHELASTIC_RESTART_COUNT. Set by the launcher for each attempt, not by the user.
  int restart_count = 0;
  // Name used in the launcher's own messages ("launch: rank 1 exited with exit code 3").
  std::string tag = "launch";

  // Elastic jobs (elastic_agent.h): the rendezvous gives this machine's first rank and the
  // world size, since machines may run different numbers of ranks; -1: from node_rank and
  // nnodes. rdzv_id, when set, is exported as TORCHELASTIC_RUN_ID (tools/launch sets it
  // for every job, "none" unless --rdzv_id says otherwise, as torchrun does).
  int first_rank = -1;
  int total_ranks = -1;
  std::string rdzv_id;

  int world_size() const { return total_ranks >= 0 ? total_ranks : nnodes * nproc_per_node; }
  int global_rank(int local_rank) const {
    return (first_rank >= 0 ? first_rank : node_rank * nproc_per_node) + local_rank;
  }
};

// Throws std::invalid_argument naming the flag and the bad value, before anything starts;
// also when this process may not open the descriptors the ranks need (check_descriptor_limit).
void validate(const LaunchOptions& options);

// The file descriptors the launcher holds for each rank on its machine: its stdout and
// stderr pipes and its pidfd, and its log file with --log_dir.
int descriptors_per_rank(const LaunchOptions& options);
// The connections to the job's store this launcher holds: with serve_store, node 0's holds
// one per rank of the whole job (world size: every machine's ranks), the others none.
long long store_connections(const LaunchOptions& options);
// What the job needs open in this launcher: open_now (what it has open already), room for
// its own (32), descriptors_per_rank per local rank and store_connections.
long long descriptors_needed(const LaunchOptions& options, long long open_now);

// RLIMIT_NOFILE against descriptors_needed: when the soft limit is too low and the hard
// limit allows, raises the soft limit to what is needed (the ranks inherit it); refuses
// (std::invalid_argument naming --nproc_per_node, the numbers and `ulimit -Hn`) only when
// even the hard limit is too low: without it, a large --nproc_per_node forked thousands of
// ranks before a pipe failed with "Too many open files". soft and hard (-1: unlimited) may
// be given for a test, then nothing is changed. Returns the soft limit the job runs with
// (-1: unlimited, or unknown).
long long check_descriptor_limit(const LaunchOptions& options, long long soft = -1, long long hard = -1);

// "0,2,5" -> {0, 2, 5}; "" -> {}. Throws std::invalid_argument on anything else.
std::set<int> parse_rank_list(const std::string& text);

// --on_failure's text: "stop" or "continue". Throws std::invalid_argument naming the flag.
LaunchOptions::OnFailure parse_on_failure(const std::string& text);

}  // namespace launch
}  // namespace distcomm
