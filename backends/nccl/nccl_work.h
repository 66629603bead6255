// The Work of one NCCL op: a TrackedWork (tracked_work.h: when it ends, and how) whose end
// marker is a CUDA event recorded on the communicator's stream after the op.
//
// wait() follows c10d: it makes the caller's CUDA stream wait for the end event and returns
// at once, so the host keeps queueing work while the collective runs. With the
// "blocking_wait" setting (and for barrier) it waits on the host instead and throws the
// op's error. Either way the watchdog (or whoever notices first) finishes the Work, which
// runs its callbacks and lets go of the tensors held for the op.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

#include "backends/nccl/nccl_comm.h"
#include "backends/nccl/tracked_work.h"

namespace distcomm {
namespace nccl {

class NcclWork : public TrackedWork {
 public:
  NcclWork(OpType op, const OpContext& ctx, std::string label, std::shared_ptr<NcclComm> comm, int device,
           cudaStream_t caller_stream, bool blocking_wait, std::vector<Tensor> in_flight);
  ~NcclWork() override;

  // Records the op's end on the stream it was issued on. Called once, after enqueueing.
  void record_end(cudaStream_t stream);

 protected:
  Marker query_marker(std::string* error) const override;
  void wait_on_device() override;
  void prepare_watchdog_thread() override;

 private:
  const int device_;
  const cudaStream_t caller_stream_;
  cudaEvent_t end_ = nullptr;
};

}  // namespace nccl
}  // namespace distcomm
