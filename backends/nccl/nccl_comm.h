// One NCCL communicator: the ranks of one group (or two of them, for point to point) on
// one CUDA device, created through the group's store and watched by the watchdog.
#pragma once

#include <nccl.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>

#include "api/dtype.h"
#include "api/reduce_op.h"
#include "api/store.h"
#include "backends/nccl/watchdog.h"

namespace distcomm {
namespace nccl {

class NcclComm : public WatchedComm {
 public:
  using Clock = std::chrono::steady_clock;

  struct Setup {
    Store* store = nullptr;
    std::string key;  // where rank 0 publishes the ncclUniqueId; unique per communicator
    int rank = 0;     // in the communicator
    int size = 1;
    int device = 0;
    bool nonblocking = true;
    std::chrono::milliseconds timeout{0};
    std::string label;  // "communicator #0 of group 'world' on cuda:0"
  };

  // Collective over the communicator's ranks: rank 0 makes the ncclUniqueId and publishes
  // it; the others read it, then all join. A rank that does not come within the timeout
  // makes a Timeout (the half-made communicator is aborted), never a hang.
  static std::shared_ptr<NcclComm> create(const Setup& setup);
  // Destroys the communicator; an aborted one is already gone.
  ~NcclComm() override;
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int device() const { return device_; }

  // The reduction an op uses, when it reduces.
  struct Reduction {
    ReduceOp op;
    DType dtype;
  };
  using Calls = std::function<ncclResult_t(ncclComm_t comm, ncclRedOp_t redop)>;

  // Issues `calls` (NCCL calls on this communicator; returns the first failure) between
  // ncclGroupStart and ncclGroupEnd, so a single op and a batch of sends and receives take
  // the same path, then waits until NCCL has taken them (nonblocking mode answers
  // ncclInProgress while it connects). With a reduction, `redop` is its NCCL op, made
  // before and released after (PREMUL_SUM is made per call). Throws the NCCL error; past
  // the deadline aborts the communicator and throws Timeout.
  void enqueue(const std::string& what, const Calls& calls, Clock::time_point deadline,
               const Reduction* reduction = nullptr);

  // WatchedComm
  std::string async_error() override;
  void abort() override;
  std::string label() const override { return label_; }
  bool aborted() const { return aborted_.load(); }

 private:
  NcclComm(int device, std::string label);
  // Waits while r is ncclInProgress. Returns the final result, or ncclInProgress when the
  // deadline passed first.
  ncclResult_t settle(ncclResult_t r, Clock::time_point deadline);

  const int device_;
  const std::string label_;
  // Serialises enqueue(): ops reach NCCL in issue order.
  std::mutex enqueue_mu_;
  // Guards the handle's life: calls share it, abort() takes it alone, so the watchdog never
  // frees the communicator under a call in progress (nonblocking calls are short).
  std::shared_mutex handle_mu_;
  ncclComm_t comm_ = nullptr;
  std::atomic<bool> aborted_{false};
};

}  // namespace nccl
}  // namespace distcomm
