// spawn: fork-based, like torch.multiprocessing.spawn with start_method="fork".
//
// The children run fn in a copy of the caller's memory (no exec), so spawn is for programs
// that call it before they create threads or groups. It is deliberately small; the
// launcher (tools/launch) is the full-featured way to start ranks of a program.
#include "api/process/spawn.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "api/errors.h"
#include "api/process/failure_report.h"
#include "api/init.h"
#include "api/process/job_identity.h"
#include "api/process/local_processes.h"

namespace distcomm {
namespace {

using Clock = std::chrono::steady_clock;

// The rank's environment, as a launcher would have set it.
void export_rank_environment(int rank, int nprocs, int port, const JobIdentity& identity,
                             const SpawnOptions& options) {
  ::setenv("RANK", std::to_string(rank).c_str(), 1);
  ::setenv("WORLD_SIZE", std::to_string(nprocs).c_str(), 1);
  ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
  ::setenv("LOCAL_WORLD_SIZE", std::to_string(nprocs).c_str(), 1);
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  ::setenv(kRunIdVariable, identity.run_id.c_str(), 1);
  ::setenv(kStoreTokenVariable, identity.token.c_str(), 1);
  if (!options.backend.empty()) ::setenv("DISTCOMM_BACKEND", options.backend.c_str(), 1);
}

// What fn threw (the FailureReport its child wrote), else how the child ended.
std::string how_it_failed(const local::Child& c) {
  if (auto report = FailureReport::decode(c.report)) return "it threw " + report->message;
  return local::describe_wait_status(c.status);
}

}  // namespace

void spawn(int nprocs, const std::function<void(int rank, int world_size)>& fn, const SpawnOptions& options) {
  if (nprocs < 1) throw InvalidArgument("spawn: nprocs must be at least 1, got " + std::to_string(nprocs));
  if (!fn) throw InvalidArgument("spawn: fn is empty");
  if (options.timeout.count() < 0 || options.grace.count() < 0) {
    throw InvalidArgument("spawn: timeout and grace must not be negative");
  }
  local::ChildSet children;
  try {
    const int port = local::pick_free_port();
    // Each call is its own job: a stray rank of another spawn() cannot join it.
    const JobIdentity identity = new_job_identity();
    for (int rank = 0; rank < nprocs; ++rank) {
      children.add(local::fork_child([&] {
        export_rank_environment(rank, nprocs, port, identity, options);
        fn(rank, nprocs);
        return std::string();
      }));
    }
  } catch (const std::runtime_error& e) {
    children.stop(options.grace);
    throw Error(std::string("spawn: cannot start the ranks: ") + e.what());
  }

  const Clock::time_point start = Clock::now();
  while (children.running() > 0) {
    // Woken early by any child's exit; the limit is for SpawnOptions::timeout.
    auto wait = std::chrono::milliseconds(1000);
    if (options.timeout.count() > 0) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(start + options.timeout - Clock::now());
      wait = std::clamp(left, std::chrono::milliseconds(1), wait);
    }
    const std::vector<size_t> exited = children.poll(wait);
    const auto failed = std::find_if(exited.begin(), exited.end(),
                                     [&](size_t r) { return !local::exited_cleanly(children[r].status); });
    if (failed != exited.end()) {
      children.stop(options.grace);
      // Now that every rank has ended and said why, the one that failed first by time.
      int cause = children.first_failure([&](size_t r) -> std::optional<int64_t> {
        if (auto report = FailureReport::decode(children[r].report)) return report->unix_time_ns;
        return std::nullopt;
      });
      if (cause < 0) cause = static_cast<int>(*failed);
      throw Error("spawn: rank " + std::to_string(cause) + " of " + std::to_string(nprocs) +
                  " failed first: " + how_it_failed(children[static_cast<size_t>(cause)]) +
                  "; the other ranks were stopped");
    }
    if (children.running() > 0 && options.timeout.count() > 0 && Clock::now() - start >= options.timeout) {
      children.stop(options.grace);
      throw Timeout("spawn: the ranks were still running after " + std::to_string(options.timeout.count()) +
                    "s (SpawnOptions::timeout); all were stopped");
    }
  }
}

void run_as_rank_or_spawn(int nprocs, const std::function<void()>& rank_body, const SpawnOptions& options) {
  if (launched_as_rank()) {
    rank_body();
    return;
  }
  spawn(nprocs, [&rank_body](int, int) { rank_body(); }, options);
}

}  // namespace distcomm
