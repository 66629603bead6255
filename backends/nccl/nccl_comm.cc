#include "backends/nccl/nccl_comm.h"

#include <algorithm>

#include "api/errors.h"
#include "backends/nccl/cuda_status.h"
#include "backends/nccl/nccl_types.h"
#include "backends/nccl/polling.h"
#include "backends/nccl/unique_id_exchange.h"

namespace distcomm {
namespace nccl {
namespace {

// How long abort() waits for a call in progress before leaving the abort to its thread:
// nonblocking calls return in microseconds, a blocking one may never.
constexpr std::chrono::milliseconds kAbortLockWait{100};

// End events kept per communicator: enough for the ops a program keeps in flight.
constexpr size_t kEventsKept = 256;

std::shared_ptr<NcclComm::EventPool> new_event_pool(int device) {
  return std::make_shared<NcclComm::EventPool>(
      [device] {
        DeviceGuard guard(device);
        RelaxedCaptureMode relaxed;  // safe while another thread captures a graph
        cudaEvent_t e;
        check_cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
        return e;
      },
      [device](cudaEvent_t e) {
        try {
          DeviceGuard guard(device);
          cudaEventDestroy(e);  // CUDA frees it once the GPU has passed it
        } catch (const Error&) {
          // The device is gone (the driver failed): nothing left to free on it.
        }
      },
      kEventsKept);
}

// The id exchange of a communicator that is not split from another.
UniqueIdExchange id_exchange(const NcclComm::Setup& setup) {
  UniqueIdExchange x;
  x.store = setup.store;
  x.key = setup.key;
  x.root = setup.rank == 0;
  x.id_size = sizeof(ncclUniqueId::internal);
  x.label = setup.label;
  x.rank = setup.rank;
  x.size = setup.size;
  x.peer_failure = setup.peer_failure;
  return x;
}

Store::Bytes new_unique_id() {
  ncclUniqueId id;
  const ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) throw_nccl_error("ncclGetUniqueId", r);
  return Store::Bytes(id.internal, id.internal + sizeof(id.internal));
}

}  // namespace

struct NcclComm::Settled {
  Waited how;
  ncclResult_t result;
};

NcclComm::NcclComm(Setup setup) : setup_(std::move(setup)), events_(new_event_pool(setup_.device)) {}

NcclComm::~NcclComm() {
  close(Clock::now() + std::chrono::seconds(10), setup_.label + " was destroyed");
  if (!stream_ && !ready_) return;
  try {
    DeviceGuard device(setup_.device);
    if (ready_) cudaEventDestroy(ready_);
    if (stream_) cudaStreamDestroy(stream_);  // CUDA frees it once queued work is done
  } catch (const Error&) {
    // The device is gone (the driver failed): nothing left to free on it.
  }
}

void NcclComm::initialize(std::chrono::milliseconds timeout) {
  std::lock_guard<std::recursive_mutex> issue(issue_mu_);
  if (set_up_) return;
  if (setup_error_) std::rethrow_exception(setup_error_);
  const auto deadline = deadline_after(timeout);
  try {
    const std::string setting_up = "rank " + std::to_string(setup_.rank) + " of " + std::to_string(setup_.size) +
                                   " setting up";
    if (aborted_) throw_aborted(setting_up);
    DeviceGuard device(setup_.device);
    RelaxedCaptureMode relaxed;  // another thread may be capturing a graph meanwhile
    // Non-blocking: the internal stream must not synchronise with the legacy stream by
    // itself, only through the events distcomm records.
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    check_cuda(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    const ncclResult_t r = create_handle(setting_up, deadline);
    const Settled s = settle(r, deadline);
    if (s.how == Waited::kAborted || aborted_) throw_aborted(setting_up);
    if (s.how == Waited::kTimedOut) {
      const std::string text = setup_.label + ": rank " + std::to_string(setup_.rank) + " of " +
                               std::to_string(setup_.size) + " waited " + std::to_string(timeout.count()) +
                               " ms for the other ranks to join the communicator; a rank may have died or not yet "
                               "issued its first op on this communicator";
      abort(text);
      throw Timeout(text);
    }
    if (s.result != ncclSuccess) {
      std::string text;
      {
        std::lock_guard<std::timed_mutex> call(call_mu_);
        text = setup_.label + ": " + nccl_error_text("ncclCommInitRankConfig", s.result, comm_);
      }
      abort(text);
      throw_nccl_text(s.result, text);
    }
    set_up_ = true;
    ready_to_close_ = true;
    // Every rank has joined, so every rank read the id: the root's keys can go.
    if (!setup_.split_from) forget_unique_id(id_exchange(setup_));
  } catch (...) {
    setup_error_ = std::current_exception();
    throw;
  }
}

ncclResult_t NcclComm::create_handle(const std::string& setting_up, Clock::time_point deadline) {
  if (setup_.split_from) {
    // The split ran to its end (or threw) inside split(): the handle is set up.
    const ncclComm_t handle =
        setup_.split_from->split(setup_.split_color, setup_.split_key, setup_.label + ": " + setting_up, deadline);
    std::lock_guard<std::timed_mutex> call(call_mu_);
    comm_ = handle;
    if (aborted_ || closed_) {
      abort_handle();
      throw_aborted(setting_up);
    }
    return ncclSuccess;
  }
  const Store::Bytes bytes = exchange_unique_id(id_exchange(setup_), new_unique_id, deadline, aborted_);
  ncclUniqueId id;
  std::copy(bytes.begin(), bytes.end(), id.internal);
  std::lock_guard<std::timed_mutex> call(call_mu_);
  if (aborted_ || closed_) throw_aborted(setting_up);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = setup_.nonblocking ? 0 : 1;
  const ncclResult_t r = ncclCommInitRankConfig(&comm_, setup_.size, id, setup_.rank, &config);
  abort_if_asked();
  return r;
}

ncclComm_t NcclComm::split(int color, int key, const std::string& what, Clock::time_point deadline) {
  std::lock_guard<std::recursive_mutex> issue(issue_mu_);
  if (!set_up_) throw Error(what + ": " + setup_.label + " is not set up");
  if (aborted_) throw_aborted(what);
  const Clock::time_point began = Clock::now();
  auto waited_ms = [&] { return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - began).count(); };
  DeviceGuard device(setup_.device);
  // The parent's ops issued before this may still run on the GPU: that is safe, and
  // stream_ is deliberately not synchronized first. Every rank issued those ops before its
  // split (ops and splits on one communicator come in the same order on every rank, and
  // the issue lock keeps this rank's in that order), and NCCL had taken each of them
  // (enqueue() waited for the communicator's state to leave ncclInProgress, so a
  // nonblocking split never starts while a call on the parent is still in progress). So
  // those kernels are matched on every rank and end with no further host call (NCCL's
  // proxy thread drives their network part). ncclCommSplit works on the host (the parent's
  // bootstrap, then the new communicator's own setup): it queues nothing on the parent's
  // streams, and whatever device-wide wait its setup may make can only wait for those
  // kernels, which end by themselves. A synchronize here would only add a wait for the GPU
  // to every subgroup made.
  ncclResult_t r;
  {
    std::lock_guard<std::timed_mutex> call(call_mu_);
    if (!comm_) throw_aborted(what);
    split_child_ = nullptr;
    // No config: the new communicator takes this one's, so its blocking mode too.
    r = ncclCommSplit(comm_, color, key, &split_child_, nullptr);
    abort_if_asked();
  }
  // Nonblocking, NCCL runs the split on a thread of its own and reports on this
  // communicator's state, which is what is polled: NCCL 2.28's ncclCommSplit returns
  // ncclSuccess, not ncclInProgress, while that thread still runs (unlike
  // ncclCommInitRankConfig, it does not ask the state before returning). Blocking, r is
  // the outcome.
  const Settled s = settle(setup_.nonblocking && r == ncclSuccess ? ncclInProgress : r, deadline);
  ncclComm_t child = nullptr;
  std::string error_text;
  {
    std::lock_guard<std::timed_mutex> call(call_mu_);
    child = split_child_;
    split_child_ = nullptr;
    if (s.how == Waited::kDone && s.result != ncclSuccess) {
      error_text = what + ": " + nccl_error_text("ncclCommSplit", s.result, comm_);
    }
  }
  // A new communicator that will not be used (NCCL hands it over even when its setup
  // failed) is aborted, which frees it.
  auto drop = [&] {
    if (child) ncclCommAbort(child);
    child = nullptr;
  };
  if (s.how == Waited::kAborted || aborted_) {
    drop();
    throw_aborted(what);
  }
  if (s.how == Waited::kTimedOut) {
    const std::string text = what + ": not every rank of " + setup_.label +
                             " joined ncclCommSplit before the timeout (every rank of a group takes part in "
                             "making its subgroups); aborted it";
    abort(text);
    drop();
    throw Timeout(text);
  }
  if (s.result != ncclSuccess) {
    drop();
    throw_nccl_text(s.result, error_text);
  }
  if (color == NCCL_SPLIT_NOCOLOR) return nullptr;
  if (!child) throw Error(what + ": ncclCommSplit of " + setup_.label + " returned no communicator");
  // The split's job set the new communicator up; its own state says how that went.
  ncclResult_t state = ncclInProgress;
  ncclResult_t q = ncclSuccess;
  const Waited child_wait = poll_until(
      [&] { return (q = ncclCommGetAsyncError(child, &state)) != ncclSuccess || state != ncclInProgress; }, deadline,
      &aborted_);
  if (child_wait == Waited::kAborted) {
    drop();
    throw_aborted(what);
  }
  if (child_wait == Waited::kTimedOut) {
    // Still in progress at the deadline: the new communicator's setup did not end in time
    // (a rank of it may have gone). That is a Timeout, not NCCL's "operation in progress".
    // Only the child is dropped: the parent's own part of the split ended well above.
    const std::string text = what + ": the communicator split from " + setup_.label +
                             " was still being set up by NCCL at the op's deadline, " + std::to_string(waited_ms()) +
                             " ms after the split began (a rank of the new communicator may have died); dropped it";
    drop();
    throw Timeout(text);
  }
  const ncclResult_t outcome = q != ncclSuccess ? q : state;
  if (outcome != ncclSuccess) {
    const std::string text = what + ": " + nccl_error_text("ncclCommSplit", outcome, child);
    drop();
    throw_nccl_text(outcome, text);
  }
  return child;
}

void NcclComm::enqueue(const std::string& what, cudaStream_t caller, const Calls& calls, Clock::time_point deadline,
                       const Reduction* reduction) {
  enqueue_together(what, caller, {{this, calls, reduction}}, deadline);
}

void NcclComm::enqueue_together(const std::string& what, cudaStream_t caller, const std::vector<Part>& parts,
                                Clock::time_point deadline) {
  // Held by the backend across the whole op already (op_issue.h); taken here too for any
  // other caller. In the parts' order, as CommSet takes them.
  std::vector<std::unique_lock<std::recursive_mutex>> issuing;
  for (const Part& p : parts) issuing.push_back(p.comm->lock_issue());
  for (const Part& p : parts) {
    if (!p.comm->set_up_) throw Error(what + ": " + p.comm->setup_.label + " is not set up");
    if (p.comm->aborted_) p.comm->throw_aborted(what);
  }
  // The legacy default stream (caller nullptr) is the current device's.
  DeviceGuard device(parts.front().comm->setup_.device);
  // Order each internal stream behind what the caller queued so far (the event is reused:
  // a wait takes the event's state at the time of the call).
  for (const Part& p : parts) {
    check_cuda(cudaEventRecord(p.comm->ready_, caller), "cudaEventRecord");
    check_cuda(cudaStreamWaitEvent(p.comm->stream_, p.comm->ready_, 0), "cudaStreamWaitEvent");
  }
  ncclResult_t r = ncclSuccess;
  std::vector<ncclRedOp_t> redops(parts.size(), ncclSum);
  std::vector<bool> created(parts.size(), false);
  {
    std::vector<std::unique_lock<std::timed_mutex>> calling;
    for (const Part& p : parts) calling.emplace_back(p.comm->call_mu_);
    for (const Part& p : parts) {
      if (!p.comm->comm_) p.comm->throw_aborted(what);
    }
    for (size_t i = 0; i < parts.size(); ++i) {
      const Reduction* red = parts[i].reduction;
      if (red) {
        bool made = false;
        redops[i] = make_redop(red->op, red->dtype, parts[i].comm->comm_, &made);
        created[i] = made;
      }
    }
    // One group, whatever the number of communicators: NCCL starts their calls together,
    // so the sends and receives of a batch cannot wait for each other.
    r = ncclGroupStart();
    if (r == ncclSuccess) {
      for (size_t i = 0; i < parts.size() && r == ncclSuccess; ++i) {
        NcclComm& c = *parts[i].comm;
        r = parts[i].calls(c.comm_, redops[i], c.stream_);
      }
      // Close the group whatever happened inside it, or this thread's next group nests.
      const ncclResult_t end = ncclGroupEnd();
      if (r == ncclSuccess) r = end;
    }
    for (const Part& p : parts) p.comm->abort_if_asked();
  }
  std::vector<Settled> settled;
  for (const Part& p : parts) settled.push_back(p.comm->settle(r, deadline));
  std::vector<std::string> error_text(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    NcclComm& c = *parts[i].comm;
    std::lock_guard<std::timed_mutex> call(c.call_mu_);
    // The op has been taken (or failed): a premultiplied sum may go now, if the
    // communicator it belongs to still exists.
    if (created[i] && c.comm_) ncclRedOpDestroy(redops[i], c.comm_);
    if (settled[i].how == Waited::kDone && settled[i].result != ncclSuccess) {
      error_text[i] = what + ": " + nccl_error_text("NCCL", settled[i].result, c.comm_);
    }
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    if (settled[i].how == Waited::kAborted || parts[i].comm->aborted_) parts[i].comm->throw_aborted(what);
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    if (settled[i].how != Waited::kTimedOut) continue;
    NcclComm& c = *parts[i].comm;
    const std::string text = what + ": NCCL did not take the op before its timeout; aborted " + c.setup_.label +
                             " (a peer may have died or not issued the matching op)";
    c.abort(text);
    throw Timeout(text);
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    if (settled[i].result != ncclSuccess) throw_nccl_text(settled[i].result, error_text[i]);
  }
}

NcclComm::Settled NcclComm::settle(ncclResult_t r, Clock::time_point deadline) {
  if (r != ncclInProgress) return {Waited::kDone, r};
  ncclResult_t state = ncclInProgress;
  bool gone = false;
  const Waited how = poll_until(
      [&] {
        std::lock_guard<std::timed_mutex> call(call_mu_);
        if (!comm_) {
          gone = true;  // aborted or closed meanwhile
          return true;
        }
        const ncclResult_t q = ncclCommGetAsyncError(comm_, &state);
        if (q != ncclSuccess) state = q;
        return state != ncclInProgress;
      },
      deadline, &aborted_);
  return {gone ? Waited::kAborted : how, state};
}

void NcclComm::close(Clock::time_point deadline, const std::string& why) {
  std::unique_lock<std::timed_mutex> call(call_mu_, std::defer_lock);
  if (!call.try_lock_for(kAbortLockWait)) {
    abort(why);
    return;
  }
  if (closed_) return;
  closed_ = true;
  if (!ready_to_close_ || aborted_) {
    // Never set up, or being set up on another thread (whose wait for the unique id or
    // for NCCL sees the abort), or an abort was left to a call that has returned since.
    keep_reason(why);
    abort_handle();
    return;
  }
  try {
    DeviceGuard device(setup_.device);
    // Finalize flushes this rank's work; nonblocking, it is polled until the deadline or
    // an abort. The poll holds call_mu_ (the handle is not to be used meanwhile), so an
    // abort() from another thread (ProcessGroup::abort() during a shutdown) cannot take it
    // and only raises aborted_: the poll watches that flag, and the abort_handle() below
    // runs at once rather than after the whole close time. ncclCommAbort may end a
    // communicator whose finalize is in progress. Blocking, ncclCommFinalize returns when
    // done and nothing here can end it sooner (the thread-safety rule of nccl_comm.h).
    ncclResult_t r = ncclCommFinalize(comm_);
    if (r == ncclInProgress && !aborted_) {
      poll_until([&] { return ncclCommGetAsyncError(comm_, &r) != ncclSuccess || r != ncclInProgress; }, deadline,
                 &aborted_);
    }
    if (r == ncclSuccess && !aborted_) {
      ncclCommDestroy(comm_);
      comm_ = nullptr;
      return;
    }
  } catch (const Error&) {
    // No device to switch to: abort below frees the handle all the same.
  }
  keep_reason(why + "; " + setup_.label + " did not finalize");
  abort_handle();
}

std::exception_ptr NcclComm::async_error() {
  bind_thread_to_device(setup_.device);
  std::unique_lock<std::timed_mutex> call(call_mu_, std::try_to_lock);
  if (!call.owns_lock() || !comm_) return nullptr;  // busy issuing (asked again next round), or gone
  ncclResult_t r = ncclSuccess;
  const ncclResult_t q = ncclCommGetAsyncError(comm_, &r);
  if (q != ncclSuccess) return nccl_error(q, nccl_error_text("ncclCommGetAsyncError", q, comm_));
  if (r == ncclSuccess || r == ncclInProgress) return nullptr;
  return nccl_error(r, nccl_error_text("ncclCommGetAsyncError", r, comm_));
}

void NcclComm::keep_reason(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(reason_mu_);
    if (abort_reason_.empty()) abort_reason_ = reason.empty() ? setup_.label + " was aborted" : reason;
  }
  aborted_ = true;  // after the reason: whoever sees the flag finds the reason
}

void NcclComm::abort(const std::string& reason) {
  keep_reason(reason);
  std::unique_lock<std::timed_mutex> call(call_mu_, std::defer_lock);
  if (call.try_lock_for(kAbortLockWait)) abort_handle();
  // Otherwise a blocking call holds it: abort_if_asked() runs when that call returns.
}

std::string NcclComm::abort_reason() const {
  if (!aborted_) return "";
  std::lock_guard<std::mutex> lock(reason_mu_);
  return abort_reason_;
}

void NcclComm::abort_if_asked() {
  if (aborted_) abort_handle();
}

void NcclComm::abort_handle() {
  if (!comm_) return;
  // ncclCommAbort leaves the communicator's device current on the calling thread (its
  // teardown switches to it); the guard puts the caller's back.
  try {
    DeviceGuard device(setup_.device);
    ncclCommAbort(comm_);
  } catch (const Error&) {
    ncclCommAbort(comm_);  // no device to switch to: free the handle all the same
  }
  comm_ = nullptr;
}

void NcclComm::throw_aborted(const std::string& what) const {
  const std::string reason = abort_reason();
  throw PeerFailure(what + ": " + setup_.label +
                    (reason.empty() ? std::string(" was closed (the backend was shut down)") : " was aborted: " + reason));
}

}  // namespace nccl
}  // namespace distcomm
