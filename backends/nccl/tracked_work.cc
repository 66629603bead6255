#include "backends/nccl/tracked_work.h"

#include "api/cuda_stream.h"
#include "api/errors.h"
#include "backends/nccl/polling.h"

namespace distcomm {
namespace nccl {

TrackedWork::TrackedWork(OpType op, const OpContext& ctx, std::string label, std::shared_ptr<WatchedComm> comm,
                         CUstream_st* issue_stream, bool blocking_wait, std::vector<Tensor> in_flight)
    : Work(op, ctx.seq, ctx.description),
      label_(std::move(label)),
      comm_(std::move(comm)),
      issue_stream_(issue_stream),
      blocking_wait_(blocking_wait),
      in_flight_(std::move(in_flight)) {}

TrackedOp::Poll TrackedWork::judge(std::exception_ptr* error) const {
  std::string why;
  switch (query_marker(&why)) {
    case Marker::kNotIssued:  // the issuer finishes it if issuing fails
    case Marker::kPending:
      return Poll::kRunning;
    case Marker::kError:
      if (error) *error = std::make_exception_ptr(Error(label_ + ": CUDA reported an error while the op ran: " + why));
      return Poll::kFailed;
    case Marker::kPassed:
      break;
  }
  // Read after the marker: an abort that began before the marker was seen may be why it
  // passed (see the header).
  const std::string aborted = comm_ ? comm_->abort_reason() : "";
  if (aborted.empty()) return Poll::kDone;
  if (error) {
    *error = std::make_exception_ptr(PeerFailure(label_ + ": " + comm_->label() +
                                                 " was aborted before the op was seen to end: " + aborted));
  }
  return Poll::kFailed;
}

TrackedOp::Poll TrackedWork::poll(std::exception_ptr* error) {
  prepare_watchdog_thread();
  return judge(error);
}

void TrackedWork::complete(std::exception_ptr error) {
  finish(error);
  std::lock_guard<std::mutex> lock(in_flight_mu_);
  in_flight_.clear();
}

bool TrackedWork::is_completed() const {
  if (Work::is_completed()) return true;
  // A failure is left to the watchdog, which records it as the group's fault before it
  // fails the Work.
  if (judge(nullptr) != Poll::kDone) return false;
  const_cast<TrackedWork*>(this)->complete(nullptr);
  return true;
}

void TrackedWork::wait(std::chrono::milliseconds timeout) {
  if (forked_since_issue(*this)) return Work::wait(timeout);  // before driving or blocking (work.h)
  if (blocking_wait_) {
    host_wait(timeout);
    return;
  }
  if (std::exception_ptr error = exception()) std::rethrow_exception(error);
  if (query_marker(nullptr) == Marker::kNotIssued) {
    host_wait(timeout);  // never issued: it has finished, or is about to, with its error
    return;
  }
  wait_on_device(current_cuda_stream(issue_stream_));
}

void TrackedWork::host_wait(std::chrono::milliseconds timeout) {
  const auto deadline = is_use_default(timeout) ? Clock::time_point::max() : Clock::now() + timeout;
  if (poll_until([&] { return is_completed(); }, deadline, nullptr, std::chrono::microseconds(200)) != Waited::kDone) {
    throw Timeout(label_ + ": not finished after " + std::to_string(timeout.count()) +
                  " ms of waiting (Work::wait timeout); the op is still running");
  }
  Work::wait();  // completed: rethrows the op's error, if any
}

}  // namespace nccl
}  // namespace distcomm
