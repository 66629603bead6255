#include "backends/nccl/concurrent_abort.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <system_error>
#include <thread>

#include "api/logging.h"

namespace distcomm {
namespace nccl {
namespace {

// Shared by the caller and the task threads, which may outlive the call.
struct Progress {
  std::mutex mu;
  std::condition_variable changed;
  std::vector<bool> returned;
};

}  // namespace

std::vector<size_t> run_concurrently(std::vector<std::function<void()>> tasks, std::chrono::milliseconds bound,
                                     std::chrono::milliseconds head_start) {
  auto progress = std::make_shared<Progress>();
  progress->returned.assign(tasks.size(), false);
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + bound;
  for (size_t i = 0; i < tasks.size(); ++i) {
    auto run = [progress, i, task = std::move(tasks[i])] {
      try {
        task();
      } catch (...) {
        // An abort that fails has done what it could; the caller only needs to know it
        // returned.
      }
      {
        std::lock_guard<std::mutex> lock(progress->mu);
        progress->returned[i] = true;
      }
      progress->changed.notify_all();
    };
    try {
      std::thread(run).detach();
    } catch (const std::system_error&) {
      run();  // no thread to be had: better in sequence than not at all
    }
    if (i == 0 && head_start.count() > 0) {
      // The failing communicator's abort goes first; if it does not return soon, it may be
      // waiting for one of the others, which then start regardless.
      std::unique_lock<std::mutex> lock(progress->mu);
      progress->changed.wait_until(lock, start + std::min(head_start, bound / 2), [&] { return progress->returned[0]; });
    }
  }
  std::unique_lock<std::mutex> lock(progress->mu);
  auto all_returned = [&] { return std::all_of(progress->returned.begin(), progress->returned.end(), [](bool r) { return r; }); };
  progress->changed.wait_until(lock, deadline, all_returned);
  std::vector<size_t> running;
  for (size_t i = 0; i < progress->returned.size(); ++i) {
    if (!progress->returned[i]) running.push_back(i);
  }
  return running;
}

std::vector<std::string> abort_concurrently(const std::vector<std::shared_ptr<WatchedComm>>& comms,
                                            const std::string& reason, std::chrono::milliseconds bound) {
  std::vector<std::shared_ptr<WatchedComm>> unique;
  for (const auto& c : comms) {
    // An aborted communicator keeps its first reason: one already aborted (or being
    // aborted, maybe stuck) needs nothing more.
    if (c && c->abort_reason().empty() && std::find(unique.begin(), unique.end(), c) == unique.end()) {
      unique.push_back(c);
    }
  }
  std::vector<std::function<void()>> tasks;
  for (const auto& c : unique) tasks.push_back([c, reason] { c->abort(reason); });
  std::vector<std::string> running;
  for (size_t i : run_concurrently(std::move(tasks), bound, kFirstAbortHeadStart)) running.push_back(unique[i]->label());
  for (const auto& label : running) {
    log_line("distcomm nccl: the abort of " + label + " (ncclCommAbort) had not returned after " +
             std::to_string(bound.count()) + " ms; it goes on in the background and nothing waits for it");
  }
  return running;
}

}  // namespace nccl
}  // namespace distcomm
