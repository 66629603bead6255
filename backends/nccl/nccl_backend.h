// The nccl backend: CUDA tensors through NCCL, for one group.
//
// Communicators: one per device this rank uses in the group (rank 0 makes the
// ncclUniqueId and shares it through the group's store), created at the first op on that
// device or, with "eager_init", with the group; point to point uses one two-rank
// communicator per peer, so a send involves only its two ranks. Subgroups get their own
// backend, hence their own communicators.
//
// Streams: every op runs on one internal stream per device, after an event that orders it
// behind the caller's stream (the op options' cuda_stream; nullptr: the legacy default
// stream). Work::wait() then orders the caller's stream behind the op (nccl_work.h).
//
// Faults: a watchdog (watchdog.h) ends ops, aborts communicators on NCCL errors and
// timeouts, and poisons the backend, whose later ops throw the first fault at once.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "api/backend.h"
#include "backends/nccl/nccl_comm.h"
#include "backends/nccl/nccl_config.h"
#include "backends/nccl/watchdog.h"

namespace distcomm {
namespace nccl {

class NcclBackend : public Backend {
 public:
  // Throws BackendUnavailable without a CUDA device, InvalidArgument for bad settings.
  explicit NcclBackend(BackendOptions options);
  ~NcclBackend() override;

  std::string name() const override { return "nccl"; }
  std::vector<OpType> supported_ops() const override;
  bool reduces_natively(ReduceOp op, DType dtype) const override;

  WorkPtr all_reduce(Tensor& tensor, const AllReduceOptions& opts, const OpContext& ctx) override;
  WorkPtr broadcast(Tensor& tensor, const BroadcastOptions& opts, const OpContext& ctx) override;
  WorkPtr reduce(Tensor& tensor, const ReduceOptions& opts, const OpContext& ctx) override;
  WorkPtr all_gather(Tensor& output, const Tensor& input, const AllGatherOptions& opts,
                     const OpContext& ctx) override;
  WorkPtr gather(Tensor& output, const Tensor& input, const GatherOptions& opts, const OpContext& ctx) override;
  WorkPtr scatter(Tensor& output, const Tensor& input, const ScatterOptions& opts, const OpContext& ctx) override;
  WorkPtr reduce_scatter(Tensor& output, const Tensor& input, const ReduceScatterOptions& opts,
                         const OpContext& ctx) override;
  WorkPtr all_to_all(Tensor& output, const Tensor& input, const std::vector<int64_t>& output_counts,
                     const std::vector<int64_t>& input_counts, const AllToAllOptions& opts,
                     const OpContext& ctx) override;
  WorkPtr barrier(const BarrierOptions& opts, const OpContext& ctx) override;
  WorkPtr send(const Tensor& tensor, int dst, const P2POptions& opts, const OpContext& ctx) override;
  WorkPtr recv(Tensor& tensor, int src, const P2POptions& opts, const OpContext& ctx) override;

  void shutdown() override;

 private:
  // What one op needs besides its NCCL calls.
  struct Launch {
    OpType op;
    const OpContext* ctx;
    int device;
    CUstream_st* caller_stream;
    std::vector<Tensor> tensors;  // held until the op ends
    int peer = -1;                // point to point: the other rank (a two-rank communicator)
    std::optional<NcclComm::Reduction> reduction = std::nullopt;
    bool blocking_wait = false;   // barrier waits on the host whatever the setting
  };
  // The internal stream of a device, and the event that orders it behind callers' streams.
  struct DeviceStreams {
    cudaStream_t stream = nullptr;
    cudaEvent_t ready = nullptr;
    void* barrier_scratch = nullptr;  // one float on the device, for barrier
  };

  // Runs calls(comm, redop, internal stream) for the op; returns its Work. A failure here,
  // after validation, ends the Work with the error and poisons the backend.
  using OpCalls = std::function<ncclResult_t(ncclComm_t comm, ncclRedOp_t redop, cudaStream_t stream)>;
  WorkPtr launch(Launch launch, const OpCalls& calls);
  // send (op kSend) or recv of tensor with peer, on the pair's communicator.
  WorkPtr point_to_point(OpType op, const Tensor& tensor, int peer, const P2POptions& opts, const OpContext& ctx);
  // The Launch of a reducing op, once its reduction is one NCCL has (else InvalidArgument).
  Launch reducing(OpType op, const OpContext& ctx, int device, CUstream_st* caller_stream,
                  std::vector<Tensor> tensors, ReduceOp rop, DType dtype) const;

  // Communicators and streams (callers hold mu_ with the device current).
  std::shared_ptr<NcclComm> group_comm(int device);
  std::shared_ptr<NcclComm> pair_comm(int device, int peer);
  DeviceStreams& streams(int device);

  // The CUDA device of t, checked: InvalidArgument naming the op otherwise.
  int device_of(OpType op, const Tensor& t) const;
  int same_device(OpType op, const Tensor& a, const Tensor& b) const;
  // Point to point: a pair of ranks has one communicator, on one device.
  void check_pair_device(OpType op, int peer, int device);
  // The device of ops that have no tensor (barrier, eager init).
  int default_device() const;
  // Throws the first fault (or says the backend was shut down).
  void check_usable() const;
  void record_fault(std::exception_ptr error);
  std::string op_label(OpType op, const OpContext& ctx, int device) const;

  const NcclConfig config_;
  const int visible_devices_;

  std::mutex mu_;  // issue path: communicators, streams, counters
  std::map<int, std::shared_ptr<NcclComm>> group_comms_;  // by device
  std::map<int, std::shared_ptr<NcclComm>> pair_comms_;   // by peer rank
  std::map<int, DeviceStreams> streams_;                  // by device
  int comms_created_ = 0;
  int last_device_ = -1;

  mutable std::mutex fault_mu_;
  std::exception_ptr fault_;
  bool shut_down_ = false;

  // Last member: its thread stops first, before the maps above go away.
  std::unique_ptr<Watchdog> watchdog_;
};

}  // namespace nccl
}  // namespace distcomm
