// How the nccl backend ends: a clean destroy (Backend::shutdown, from the group's
// destructor) or an abort (Backend::abort, from ProcessGroup::abort). No CUDA here, so the
// order of the steps is tested on machines without a GPU.
//
// A destroy may come right after Work::wait(), which returns before the GPU has run the op:
// aborting at once would hand the program's next kernels garbage and leave the peers
// hanging, so the ops in flight get a grace to end, and the communicators are finalized
// (ncclCommFinalize flushes this rank's work) before they are destroyed. An abort is asked
// for because something is wrong: nothing waits, every communicator is aborted
// (ncclCommAbort), and what was in flight fails.
#pragma once

#include <chrono>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "api/errors.h"
#include "api/diagnostics/group_failure.h"
#include "backends/nccl/comm_registry.h"
#include "backends/nccl/concurrent_abort.h"
#include "backends/nccl/watchdog.h"

namespace distcomm {
namespace nccl {

enum class Ending { kDestroy, kAbort };

struct EndingSettings {
  std::string backend;  // "the nccl backend of group 'world'", for messages
  std::chrono::milliseconds grace{0};       // kDestroy: how long ops in flight may take
  std::chrono::milliseconds close_time{0};  // kDestroy: how long finalizing may take
};

// Later ops are refused from the start. Then: with kDestroy, the ops in flight may end for
// up to the grace (unless the group had failed: they failed with it); what is in flight
// after that (at once with kAbort) has its communicators aborted and fails, and the peers
// are told (GroupFailure::shut_down). Last, every communicator of `comms` is finalized and
// destroyed (kDestroy; Comm::close) or aborted (kAbort; Comm::abort): all of them
// concurrently (concurrent_abort.h: one communicator's abort may wait for another's), for
// at most twice the close time (finalizing, then the abort that follows a failed one).
template <typename Comm>
void end_backend(Ending how, const EndingSettings& s, GroupFailure& failure, Watchdog& watchdog,
                 CommRegistry<Comm>& comms) {
  const bool destroy = how == Ending::kDestroy;
  const std::string ended = s.backend + (destroy ? " was shut down" : " was shut down by ProcessGroup::abort()");
  failure.shut_down(std::make_exception_ptr(PeerFailure(ended)), [&] {
    if (destroy && s.grace.count() > 0) watchdog.drain(std::chrono::steady_clock::now() + s.grace);
    return watchdog.in_flight() > 0;
  });
  watchdog.stop(destroy ? ended + " while this op was in flight (still running after the " +
                              std::to_string(s.grace.count()) + " ms shutdown grace)"
                        : ended + " while this op was in flight");
  const auto close_by = std::chrono::steady_clock::now() + s.close_time;
  std::vector<std::function<void()>> closes;
  for (auto& comm : comms.close(ended)) {
    closes.push_back([comm, close_by, destroy, ended] {
      if (destroy) {
        comm->close(close_by, ended);
      } else {
        comm->abort(ended);
      }
    });
  }
  run_concurrently(std::move(closes), s.close_time * 2);
}

// end_backend once per backend, and an abort that comes while a destroy still runs. Without
// this, ProcessGroup::abort() during a shutdown (from another thread: a signal handler, an
// error callback) would find the backend already ending and do nothing, and the destroy
// would go on finalizing for up to its close time. Here that abort aborts every
// communicator the destroy is closing: their finalize waits watch the abort (Comm::close),
// so the destroy ends promptly too.
template <typename Comm>
class BackendEnding {
 public:
  // Returns whether this call ended the backend (the first one does).
  bool end(Ending how, const EndingSettings& s, GroupFailure& failure, Watchdog& watchdog, CommRegistry<Comm>& comms) {
    bool first = false;
    std::vector<std::shared_ptr<Comm>> being_closed;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!begun_) {
        begun_ = first = true;
        // Taken before end_backend empties the registry, under the lock that a later abort
        // takes: that abort sees every communicator the destroy will close.
        if (how == Ending::kDestroy) closing_ = comms.all();
      } else {
        being_closed = closing_;
      }
    }
    if (!first) {
      if (how == Ending::kAbort && !being_closed.empty()) {
        abort_concurrently(being_closed,
                           s.backend + " was shut down by ProcessGroup::abort() while it was being destroyed",
                           s.close_time);
      }
      return false;
    }
    end_backend(how, s, failure, watchdog, comms);
    std::lock_guard<std::mutex> lock(mu_);
    closing_.clear();  // ended: a later abort has nothing to hurry
    return true;
  }

 private:
  std::mutex mu_;
  bool begun_ = false;                         // under mu_
  std::vector<std::shared_ptr<Comm>> closing_;  // under mu_: what a destroy in progress closes
};

}  // namespace nccl
}  // namespace distcomm
