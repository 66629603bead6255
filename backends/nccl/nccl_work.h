// The Work of one NCCL op. It ends when the op's end event has passed on the GPU.
//
// wait() follows c10d: it makes the caller's CUDA stream wait for the end event and returns
// at once, so the host keeps queueing work while the collective runs. With the
// "blocking_wait" setting (and for barrier) it waits on the host instead and throws the
// op's error. Either way the watchdog (or whoever notices first) finishes the Work, which
// runs its callbacks and lets go of the tensors held for the op.
#pragma once

#include <cuda_runtime_api.h>

#include <mutex>
#include <string>
#include <vector>

#include "api/backend.h"
#include "api/tensor.h"
#include "api/work.h"
#include "backends/nccl/watchdog.h"

namespace distcomm {
namespace nccl {

class NcclWork : public Work, public TrackedOp {
 public:
  // label names op, seq and rank (the OpContext's description where there is one).
  // in_flight: copies of the op's tensors, so memory they own outlives the op.
  NcclWork(OpType op, const OpContext& ctx, std::string label, int device, cudaStream_t caller_stream,
           bool blocking_wait, std::vector<Tensor> in_flight);
  ~NcclWork() override;

  // Records the op's end on the stream it was issued on. Called once, after enqueueing.
  void record_end(cudaStream_t stream);

  void wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  bool is_completed() const override;

  // TrackedOp
  Poll poll(std::string* error) override;
  void complete(std::exception_ptr error) override;
  std::string label() const override { return label_; }

 private:
  void host_wait(std::chrono::milliseconds timeout);

  const std::string label_;
  const int device_;
  const cudaStream_t caller_stream_;
  const bool blocking_wait_;
  cudaEvent_t end_ = nullptr;
  std::mutex in_flight_mu_;
  std::vector<Tensor> in_flight_;
};

}  // namespace nccl
}  // namespace distcomm
