#include "backends/nccl/nccl_work.h"

#include <algorithm>
#include <thread>

#include "api/errors.h"
#include "backends/nccl/cuda_status.h"

namespace distcomm {
namespace nccl {

NcclWork::NcclWork(OpType op, const OpContext& ctx, std::string label, int device, cudaStream_t caller_stream,
                   bool blocking_wait, std::vector<Tensor> in_flight)
    : Work(op, ctx.seq, ctx.description),
      label_(std::move(label)),
      device_(device),
      caller_stream_(caller_stream),
      blocking_wait_(blocking_wait),
      in_flight_(std::move(in_flight)) {}

NcclWork::~NcclWork() {
  // Safe even if the GPU has not reached it: CUDA frees the event once it has.
  if (end_) cudaEventDestroy(end_);
}

void NcclWork::record_end(cudaStream_t stream) {
  check_cuda(cudaEventCreateWithFlags(&end_, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  check_cuda(cudaEventRecord(end_, stream), "cudaEventRecord");
}

TrackedOp::Poll NcclWork::poll(std::string* error) {
  if (!end_) return Poll::kRunning;  // not issued yet; the issuer finishes it on failure
  const cudaError_t e = cudaEventQuery(end_);
  if (e == cudaSuccess) return Poll::kDone;
  if (e == cudaErrorNotReady) return Poll::kRunning;
  cudaGetLastError();
  if (error) *error = cuda_error_text("cudaEventQuery", e);
  return Poll::kFailed;
}

void NcclWork::complete(std::exception_ptr error) {
  finish(error);
  std::lock_guard<std::mutex> lock(in_flight_mu_);
  in_flight_.clear();
}

bool NcclWork::is_completed() const {
  if (Work::is_completed()) return true;
  // Ask the GPU rather than wait for the watchdog's next round: callers poll this.
  auto* self = const_cast<NcclWork*>(this);
  if (self->poll(nullptr) != Poll::kDone) return false;
  self->complete(nullptr);
  return true;
}

void NcclWork::wait(std::chrono::milliseconds timeout) {
  if (blocking_wait_) {
    host_wait(timeout);
    return;
  }
  if (std::exception_ptr error = exception()) std::rethrow_exception(error);
  if (!end_) {
    host_wait(timeout);  // never issued: it has finished, or is about to, with its error
    return;
  }
  // The legacy default stream (nullptr) is per device: name the op's device.
  DeviceGuard device(device_);
  check_cuda(cudaStreamWaitEvent(caller_stream_, end_, 0), "cudaStreamWaitEvent");
}

void NcclWork::host_wait(std::chrono::milliseconds timeout) {
  const auto start = Clock::now();
  auto pause = std::chrono::microseconds(5);
  while (!is_completed()) {
    if (timeout >= std::chrono::milliseconds::zero() && Clock::now() - start >= timeout) {
      throw Timeout(label_ + ": not finished after " + std::to_string(timeout.count()) +
                    " ms of waiting (Work::wait timeout); the op is still running");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(500));
  }
  Work::wait();  // completed: rethrows the op's error, if any
}

}  // namespace nccl
}  // namespace distcomm
