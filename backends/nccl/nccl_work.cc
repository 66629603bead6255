#include "backends/nccl/nccl_work.h"

#include "api/errors.h"
#include "backends/nccl/cuda_status.h"

namespace distcomm {
namespace nccl {

NcclWork::NcclWork(OpType op, const OpContext& ctx, std::string label, std::shared_ptr<NcclComm> comm, int device,
                   cudaStream_t caller_stream, bool blocking_wait, std::vector<Tensor> in_flight)
    : TrackedWork(op, ctx, std::move(label), std::move(comm), blocking_wait, std::move(in_flight)),
      device_(device),
      caller_stream_(caller_stream) {}

NcclWork::~NcclWork() {
  if (!end_) return;
  // The last reference may go on any thread, one that never chose a device included: a
  // CUDA call there would make a context on device 0 (the guard's device has one).
  try {
    DeviceGuard device(device_);
    cudaEventDestroy(end_);  // safe before the GPU reached it: CUDA frees it once it has
  } catch (const Error&) {
    // The device is gone (the driver failed): nothing left to free on it.
  }
}

void NcclWork::record_end(cudaStream_t stream) {
  check_cuda(cudaEventCreateWithFlags(&end_, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  check_cuda(cudaEventRecord(end_, stream), "cudaEventRecord");
}

TrackedWork::Marker NcclWork::query_marker(std::string* error) const {
  if (!end_) return Marker::kNotIssued;
  // is_completed() may be polled from any thread (see the destructor).
  cudaError_t e;
  try {
    DeviceGuard device(device_);
    e = cudaEventQuery(end_);
  } catch (const Error& x) {
    if (error) *error = x.what();
    return Marker::kError;
  }
  if (e == cudaSuccess) return Marker::kPassed;
  if (e == cudaErrorNotReady) return Marker::kPending;
  cudaGetLastError();
  if (error) *error = cuda_error_text("cudaEventQuery", e);
  return Marker::kError;
}

void NcclWork::wait_on_device() {
  // The legacy default stream (nullptr) is per device: name the op's device.
  DeviceGuard device(device_);
  check_cuda(cudaStreamWaitEvent(caller_stream_, end_, 0), "cudaStreamWaitEvent");
}

void NcclWork::prepare_watchdog_thread() { bind_thread_to_device(device_); }

}  // namespace nccl
}  // namespace distcomm
