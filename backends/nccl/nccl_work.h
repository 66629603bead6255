// The Work of one NCCL op: a TrackedWork (tracked_work.h: when it ends, and how) whose end
// marker is a CUDA event recorded on the communicator's stream after the op -- one per
// communicator for a batch that spans several (the pairs of its peers), the op ending
// when all have passed. Events come from the communicator's pool and go back to it.
//
// wait() follows c10d: it makes a CUDA stream wait for the end events and returns at once,
// so the host keeps queueing work while the collective runs (which stream: tracked_work.h).
// With the "blocking_wait" setting (and for barrier) it waits on the host instead and
// throws the op's error. Either way the watchdog (or whoever notices first) finishes the
// Work, which runs its callbacks and lets go of the tensors held for the op.
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
  // comm: what the watchdog questions and aborts for this op (a batch's: its pairs').
  NcclWork(OpType op, const OpContext& ctx, std::string label, std::shared_ptr<WatchedComm> comm, int device,
           cudaStream_t caller_stream, bool blocking_wait, std::vector<Tensor> in_flight);
  ~NcclWork() override;

  // Records the op's end on `comm`'s stream, after enqueueing and under its issue lock
  // (op_issue.h), once per communicator the op ran on, before the Work is shared.
  void record_end(NcclComm& comm);

 protected:
  Marker query_marker(std::string* error) const override;
  void wait_on_device(CUstream_st* stream) override;
  void prepare_watchdog_thread() override;

 private:
  struct End {
    cudaEvent_t event;
    std::shared_ptr<NcclComm::EventPool> pool;  // where it goes back
  };
  const int device_;
  std::vector<End> ends_;
};

}  // namespace nccl
}  // namespace distcomm
