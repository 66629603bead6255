#include "backends/nccl/nccl_work.h"

#include "api/errors.h"
#include "backends/nccl/cuda_status.h"

namespace distcomm {
namespace nccl {

NcclWork::NcclWork(OpType op, const OpContext& ctx, std::string label, std::shared_ptr<WatchedComm> comm, int device,
                   cudaStream_t caller_stream, bool blocking_wait, std::vector<Tensor> in_flight)
    : TrackedWork(op, ctx, std::move(label), std::move(comm), caller_stream, blocking_wait, std::move(in_flight)),
      device_(device) {}

NcclWork::~NcclWork() {
  // Back to the pool even before the GPU reached them: a later record overwrites the
  // event, and what waited on it (cudaStreamWaitEvent) took its state at that time.
  for (End& e : ends_) e.pool->give_back(e.event);
}

void NcclWork::record_end(NcclComm& comm) {
  End end{comm.event_pool()->take(), comm.event_pool()};
  ends_.push_back(end);  // first: the destructor gives it back whatever happens next
  check_cuda(cudaEventRecord(end.event, comm.stream()), "cudaEventRecord");
}

TrackedWork::Marker NcclWork::query_marker(std::string* error) const {
  if (ends_.empty()) return Marker::kNotIssued;
  // is_completed() may be polled from any thread: one that never chose a device included
  // (a CUDA call there would make a context on device 0).
  try {
    DeviceGuard device(device_);
    for (const End& end : ends_) {
      const cudaError_t e = cudaEventQuery(end.event);
      if (e == cudaErrorNotReady) return Marker::kPending;
      if (e != cudaSuccess) {
        cudaGetLastError();
        if (error) *error = cuda_error_text("cudaEventQuery", e);
        return Marker::kError;
      }
    }
  } catch (const Error& x) {
    if (error) *error = x.what();
    return Marker::kError;
  }
  return Marker::kPassed;
}

void NcclWork::wait_on_device(CUstream_st* stream) {
  // The legacy default stream (nullptr) is per device: name the op's device.
  DeviceGuard device(device_);
  for (const End& end : ends_) check_cuda(cudaStreamWaitEvent(stream, end.event, 0), "cudaStreamWaitEvent");
}

void NcclWork::prepare_watchdog_thread() { bind_thread_to_device(device_); }

}  // namespace nccl
}  // namespace distcomm
