// The Work of an op that runs on a device and is followed by the watchdog: when it counts
// as ended, and with what outcome. No CUDA here (NcclWork adds the end event and the stream
// wait), so the rules are tested on machines without a GPU.
//
// An op ends when its end marker has passed, but a marker also passes when ncclCommAbort
// tears the kernel down. So the marker is read first and the communicator second: if the
// communicator was aborted by then, the op ended because of the abort, whatever the marker
// says, and fails with the abort's reason. Communicators keep that reason before they call
// ncclCommAbort (WatchedComm::abort), so no op of an aborted communicator can succeed.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "api/plugin/backend.h"
#include "api/tensor.h"
#include "api/work.h"
#include "backends/nccl/watchdog.h"

namespace distcomm {
namespace nccl {

class TrackedWork : public Work, public TrackedOp {
 public:
  enum class Marker { kNotIssued, kPending, kPassed, kError };

  // label names op, seq and rank (the OpContext's description where there is one).
  // issue_stream: the caller's stream the op was issued after (nullptr: the legacy one).
  // in_flight: copies of the op's tensors, so that memory they own outlives the op.
  TrackedWork(OpType op, const OpContext& ctx, std::string label, std::shared_ptr<WatchedComm> comm,
              CUstream_st* issue_stream, bool blocking_wait, std::vector<Tensor> in_flight);

  // With blocking_wait, blocks the host until the op has ended and throws its error;
  // otherwise throws the error of an op that has failed, else makes a stream wait for the
  // op (wait_on_device): the thread's current stream if a CudaStreamGuard set one
  // (Work::wait(stream) does), else the stream the op was issued after.
  void wait(std::chrono::milliseconds timeout = kUseDefault) override;
  using Work::wait;  // wait(stream)
  // Asks the device rather than waiting for the watchdog's next round (callers poll this).
  bool is_completed() const override;

  // TrackedOp
  Poll poll(std::exception_ptr* error) override;
  void complete(std::exception_ptr error) override;
  std::string label() const override { return label_; }
  const Work* work() const override { return this; }

 protected:
  // Where the op's end marker stands; *error says what failed for kError.
  virtual Marker query_marker(std::string* error) const = 0;
  // Makes `stream` wait for the end marker (the host does not wait).
  virtual void wait_on_device(CUstream_st* stream) = 0;
  // Runs on the watchdog thread before it polls (NcclWork binds the thread to a device).
  virtual void prepare_watchdog_thread() {}

 private:
  Poll judge(std::exception_ptr* error) const;
  void host_wait(std::chrono::milliseconds timeout);

  const std::string label_;
  const std::shared_ptr<WatchedComm> comm_;
  CUstream_st* const issue_stream_;
  const bool blocking_wait_;
  std::mutex in_flight_mu_;
  std::vector<Tensor> in_flight_;
};

}  // namespace nccl
}  // namespace distcomm
