#include "launch/job.h"

#include <signal.h>

#include <condition_variable>
#include <cstdio>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "api/process/local_processes.h"
#include "api/process/write_fully.h"
#include "launch/duration_text.h"

namespace distcomm {
namespace launch {
namespace {

std::string in_attempt_folder(const std::string& dir, int restarts) {
  if (dir.empty() || restarts == 0) return dir;
  return dir + "/attempt_" + std::to_string(restarts);
}

// "rank 3 failed (exit code 1)"
std::string failure_line(const JobResult& r) {
  return "rank " + std::to_string(r.failed_rank) + " failed (" + r.how + ")";
}

// While it lives, says text(seconds waited) every kWaitNoteEvery.
class WaitNote {
 public:
  static constexpr std::chrono::seconds kWaitNoteEvery{30};

  WaitNote(const std::string& tag, std::function<std::string(int)> text) : tag_(tag), text_(std::move(text)) {
    thread_ = std::thread([this] {
      std::unique_lock<std::mutex> lock(mu_);
      for (int waited = 0;;) {
        if (cv_.wait_for(lock, kWaitNoteEvery, [this] { return done_; })) return;
        waited += static_cast<int>(kWaitNoteEvery.count());
        write_fully(2, tag_ + ": " + text_(waited) + "\n");
      }
    });
  }
  ~WaitNote() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  const std::string tag_;
  const std::function<std::string(int)> text_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace

LaunchOptions attempt_options(const LaunchOptions& job, int restarts) {
  LaunchOptions o = job;
  o.restart_count = restarts;
  o.log_dir = in_attempt_folder(job.log_dir, restarts);
  o.trace_dir = in_attempt_folder(job.trace_dir, restarts);
  if (!job.timeline.empty() && restarts > 0) {
    const size_t slash = job.timeline.find_last_of('/');
    size_t dot = job.timeline.find_last_of('.');
    if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) dot = job.timeline.size();
    o.timeline = job.timeline.substr(0, dot) + ".attempt_" + std::to_string(restarts) + job.timeline.substr(dot);
  }
  return o;
}

JobIdentity attempt_identity(const JobIdentity& given, int restarts) {
  JobIdentity fresh = new_job_identity();
  if (!given.run_id.empty()) fresh.run_id = restarts == 0 ? given.run_id : given.run_id + "-restart" + std::to_string(restarts);
  if (restarts == 0 && !given.token.empty()) fresh.token = given.token;
  return fresh;
}

JobResult run_job(const LaunchOptions& options) {
  validate(options);
  auto say = [&](const std::string& message) { write_fully(2, options.tag + ": " + message + "\n"); };
  if (options.nnodes > 1 && options.identity.token.empty()) {
    say("warning: --nnodes=" + std::to_string(options.nnodes) + " without " + kStoreTokenVariable +
        ": the job's store is unauthenticated; give every machine's launcher the same " + kRunIdVariable + " and " +
        kStoreTokenVariable + " in its environment");
  }
  if (options.serve_store && options.nnodes > 1 && options.node_rank != 0) {
    // Before any rank starts, and before the signal watch (a Ctrl-C while node 0's store is
    // awaited ends the launcher, which has nothing to stop yet): node 0's launcher must run
    // the job's shape too. A job of the same world size in another shape would start a rank
    // twice, or wait for one that never comes until the ranks' timeout.
    // The wait for node 0's store can be long (node 0's machine not up yet): while it lasts,
    // this launcher says every 30 s what it waits for (it said nothing for a minute).
    WaitNote note(options.tag, [&options](int waited) {
      return "waiting for node 0's launcher: its store at " + options.master_addr + ":" +
             std::to_string(options.master_port) + " has not answered for " + std::to_string(waited) +
             " s (this launcher checks there that it runs the job's --nnodes and --nproc_per_node before it starts "
             "its ranks)";
    });
    try {
      (void)options.serve_store(JobStoreRequest{options.master_addr, options.master_port, options.store_bind,
                                                options.identity, options.world_size(), options.nnodes,
                                                options.nproc_per_node, options.node_rank});
    } catch (const std::runtime_error& e) {
      JobResult cannot;
      cannot.exit_code = 1;
      cannot.failure = e.what();
      cannot.master_port = options.master_port;
      say("the job cannot run: " + cannot.failure);
      return cannot;
    }
  }
  // One watch for every attempt: a Ctrl-C between two attempts is not lost.
  SignalWatch signals;
  JobResult result;
  std::vector<std::string> survived;  // the attempts' that failed before this one
  for (int restarts = 0;; ++restarts) {
    LaunchOptions attempt = attempt_options(options, restarts);
    // The launcher starts every rank of a single-machine job: it gives each attempt its
    // own identity. Across machines (static mode, no restarts) every launcher was given one.
    if (options.nnodes == 1) attempt.identity = attempt_identity(options.identity, restarts);
    if (restarts > 0) {
      say(failure_line(result) + "; restart " + std::to_string(restarts) + " of " +
          std::to_string(options.max_restarts) + " in " +
          tenths_text(std::chrono::steady_clock::now() - result.stop_began));
    }
    try {
      result = run_attempt(attempt, signals);
    } catch (const std::invalid_argument& e) {
      if (restarts == 0) throw;  // the command line's mistake, before anything ran
      // The program went away between attempts (a rebuild, a deleted file): the job ends
      // with the failure that asked for the restart, not as a usage error.
      say("restart " + std::to_string(restarts) + " cannot start: " + e.what() + "; the job failed: " +
          failure_line(result));
      break;
    }
    result.restarts = restarts;
    result.survived.insert(result.survived.begin(), survived.begin(), survived.end());
    const bool failed = result.exit_code != 0 && result.interrupted_by == 0 && result.failed_rank >= 0;
    if (!failed || options.max_restarts == 0) break;
    int sig = result.signal_while_stopping;
    for (int s : signals.take()) {
      if (sig == 0 && stops_the_job(s)) sig = s;
    }
    if (sig != 0) {
      say("got " + local::signal_name(sig) + " while stopping after the failure: no restart");
      result.interrupted_by = sig;
      result.exit_code = 128 + sig;
      break;
    }
    // For the last line of a restart that succeeds (job_outcome.h).
    survived = result.survived;
    survived.push_back(failure_line(result) + " and the job was restarted (" + std::to_string(restarts + 1) + " of " +
                       std::to_string(options.max_restarts) + ")");
    if (restarts == options.max_restarts) {
      say(failure_line(result) + "; gave up after " + std::to_string(restarts) +
          (restarts == 1 ? " restart" : " restarts") + " (--max_restarts=" + std::to_string(options.max_restarts) + ")");
      break;
    }
  }
  return result;
}

}  // namespace launch
}  // namespace distcomm
