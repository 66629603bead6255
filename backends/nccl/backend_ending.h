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
#include <string>

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

}  // namespace nccl
}  // namespace distcomm
