// The nccl backend: CUDA tensors through NCCL, for one group.
//
// Communicators: one per device this rank uses in the group (rank 0 makes the
// ncclUniqueId and shares it through the group's store), set up by the first op on that
// device or, with "eager_init", with the group; send, recv and batch_isend_irecv use one
// two-rank communicator per peer, so they involve only their two ranks and always meet
// (a send and a peer's batched recv are on the same communicator); a batch runs as one
// grouped call over the pairs of its peers (comm_set.h). Subgroups get their own
// backend, hence their own communicators: split from this group's first one when it is
// set up (create_subgroup_backend), else through the store. All of them sit in a registry (comm_registry.h)
// whose lock is never held while a rank waits on its peers, so shutdown and the watchdog
// reach every communicator, including one still being set up.
//
// Streams: every communicator has its own internal stream; an op runs there after an
// event that orders it behind the caller's stream (the op options' cuda_stream, else the
// thread's current stream, api/cuda_stream.h; with neither the legacy default stream).
// Work::wait() then orders a stream behind the op (nccl_work.h). A stream being captured
// into a CUDA graph is refused (op_checks.h). Separate streams let a send on a pair's communicator and a collective on
// the group's progress independently, as NCCL needs when ranks issue them in different
// orders.
//
// Faults: a watchdog (watchdog.h) ends ops and takes every fault to the group's
// GroupFailure (api/diagnostics/group_failure.h), which records the first, refuses later ops and runs
// the watchdog's abort hook: every communicator of the backend is aborted, the failing one
// first, all of them concurrently and for a bounded time (concurrent_abort.h), since one
// communicator's abort may wait for another's.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "api/plugin/backend.h"
#include "api/diagnostics/group_failure.h"
#include "backends/nccl/backend_ending.h"
#include "backends/nccl/comm_registry.h"
#include "backends/nccl/comm_set.h"
#include "backends/nccl/nccl_comm.h"
#include "backends/nccl/nccl_config.h"
#include "backends/nccl/watchdog.h"

namespace distcomm {
namespace nccl {

class NcclBackend : public Backend {
 public:
  // Throws BackendUnavailable without a CUDA device, InvalidArgument for bad settings.
  // split: the subgroup's communicator comes from ncclCommSplit of its parent's, with this
  // rank's color and key (create_subgroup_backend); null: through the store, as usual.
  struct SplitFrom {
    std::shared_ptr<NcclComm> parent;
    int color = -1;
    int key = 0;
  };
  explicit NcclBackend(BackendOptions options, const SplitFrom* split = nullptr);
  ~NcclBackend() override;

  std::string name() const override { return "nccl"; }
  std::vector<OpType> supported_ops() const override;
  bool reduces_natively(ReduceOp op, DType dtype) const override;

  WorkPtr all_reduce(Tensor& tensor, const AllReduceOptions& opts, const OpContext& ctx) override;
  // One ncclAllReduce per tensor, all in one NCCL group: one launch, one end event.
  WorkPtr all_reduce_coalesced(std::vector<Tensor>& tensors, const AllReduceOptions& opts,
                               const OpContext& ctx) override;
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
  // The list forms, each in one NCCL group straight between the callers' tensors (no
  // staging copy): all_gather as one ncclBroadcast per rank, reduce_scatter as one
  // ncclReduce per rank, gather, scatter and all_to_all as ncclSend/ncclRecv per block.
  std::vector<OpType> list_ops() const override;
  WorkPtr all_gather_list(std::vector<Tensor>& outputs, const Tensor& input, const AllGatherOptions& opts,
                          const OpContext& ctx) override;
  WorkPtr gather_list(std::vector<Tensor>& outputs, const Tensor& input, const GatherOptions& opts,
                      const OpContext& ctx) override;
  WorkPtr scatter_list(Tensor& output, const std::vector<Tensor>& inputs, const ScatterOptions& opts,
                       const OpContext& ctx) override;
  WorkPtr reduce_scatter_list(Tensor& output, const std::vector<Tensor>& inputs, const ReduceScatterOptions& opts,
                              const OpContext& ctx) override;
  WorkPtr all_to_all_list(std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                          const AllToAllOptions& opts, const OpContext& ctx) override;
  WorkPtr send(const Tensor& tensor, int dst, const P2POptions& opts, const OpContext& ctx) override;
  WorkPtr recv(Tensor& tensor, int src, const P2POptions& opts, const OpContext& ctx) override;
  // One grouped call over the pair communicators of the batch's peers, those send and
  // recv use (set up in pair order if new: comm_set.h), so that either meets the other.
  WorkPtr batch_p2p(std::vector<P2POp>& ops, const P2POptions& opts, const OpContext& ctx) override;

  // Lets the ops in flight end (up to the "shutdown_grace_ms" setting), then aborts what
  // is left and closes every communicator. Work::wait() returns before the GPU has run the
  // op, so a program may destroy its group with ops still queued: aborting them at once
  // would hand its kernels garbage and leave the peers hanging.
  void shutdown() override;
  // ProcessGroup::abort(): no grace; every communicator is aborted (ncclCommAbort) at once
  // and what is in flight fails.
  void abort() override;
  // When this group's first communicator is set up on every rank (agreed through the
  // store: subgroup_split.h), a subgroup's is split from it (ncclCommSplit, on every rank
  // of this group) instead of set up through the store; otherwise nullptr on every rank:
  // the subgroup's backend is made as any other. A failure of the split
  // fails this group (its communicator was aborted, or the ranks are out of step).
  Backend* create_subgroup_backend(const BackendOptions* options, const std::vector<int>& members) override;

 private:
  // shutdown() and abort(): backend_ending.h, then the barrier scratch is freed. Once.
  void end(Ending how);

  // What one op needs besides its NCCL calls.
  struct Launch {
    OpType op;
    const OpContext* ctx;
    int device;
    CUstream_st* option_stream;   // the options' cuda_stream (nullptr: the thread's current one)
    std::vector<Tensor> tensors;  // held until the op ends
    std::optional<NcclComm::Reduction> reduction = std::nullopt;
    bool blocking_wait = false;  // barrier waits on the host whatever the setting
  };
  using CommFor = std::function<std::shared_ptr<NcclComm>()>;

  // Issues an op in op_issue.h's order: checks the caller's stream, then gets its
  // communicator from comm_for (never before: a group communicator made there is
  // numbered), sets it up if this is its first op, issues calls on it and records the end
  // event under its issue lock, returns the op's Work. A failure after the checks ends the
  // Work with the error and fails the group (this rank is out of step with the others).
  WorkPtr launch(Launch launch, const CommFor& comm_for, const NcclComm::Calls& calls);
  // send (op kSend) or recv of tensor with peer, on the pair's communicator.
  WorkPtr point_to_point(OpType op, const Tensor& tensor, int peer, const P2POptions& opts, const OpContext& ctx);
  // The NCCL calls of a batch with one peer (its rank in the pair's communicator given).
  using PairCalls = std::function<ncclResult_t(int peer, int peer_in_pair, ncclComm_t comm, cudaStream_t stream)>;
  // launch() of a batch: its peers' pair communicators, set up in pair order, one grouped
  // enqueue over them, an end event on each.
  WorkPtr launch_batch(Launch launch, const std::vector<int>& peers, const PairCalls& calls);
  // The Launch of a reducing op, once its reduction is one NCCL has (else InvalidArgument).
  Launch reducing(OpType op, const OpContext& ctx, int device, CUstream_st* option_stream,
                  std::vector<Tensor> tensors, ReduceOp rop, DType dtype) const;
  // The stream an op is issued after: the options' if set, else the thread's current one.
  // InvalidArgument if it is on another device than the op, or being captured.
  cudaStream_t checked_caller_stream(OpType op, int device, CUstream_st* option_stream) const;

  // The group's communicator on a device, and the one shared with a peer (one device per
  // pair of ranks: InvalidArgument otherwise). Made empty here; set up by launch().
  std::shared_ptr<NcclComm> group_comm(int device, const SplitFrom* split = nullptr);
  std::shared_ptr<NcclComm> pair_comm(OpType op, int device, int peer);
  // One float on the device, for barrier.
  void* barrier_scratch(int device);

  int device_of(OpType op, const Tensor& t) const;
  int same_device(OpType op, const Tensor& a, const Tensor& b) const;
  int list_device(OpType op, const Tensor& first, const std::vector<Tensor>& list) const;
  // The device of ops that have no tensor (barrier, eager init).
  int default_device() const;
  std::string op_label(OpType op, const OpContext& ctx, int device) const;

  const NcclConfig config_;
  const int visible_devices_;
  const std::string key_prefix_;  // fresh per backend: unique_id_exchange.h

  // Shared with the abort hook and the watchdog's thread, which may outlive this object.
  const std::shared_ptr<CommRegistry<NcclComm>> comms_ = std::make_shared<CommRegistry<NcclComm>>();
  const std::shared_ptr<GroupFailure> failure_;
  int group_comms_made_ = 0;  // under the registry's lock (get_or_make's make runs there)
  // The device of the group's first communicator (#0, the same one on every rank: ranks
  // make them in op order), which subgroups split; -1 before it is made.
  std::atomic<int> first_comm_device_{-1};
  // Subgroups asked for so far (create_subgroup_backend, same order on every rank): names
  // the store keys through which the ranks agree whether to split.
  int subgroups_asked_ = 0;
  std::atomic<int> last_device_{-1};
  std::mutex scratch_mu_;
  std::map<int, void*> barrier_scratch_;  // by device
  BackendEnding<NcclComm> ending_;  // shutdown() and abort(), once (backend_ending.h)

  // Last member: destroyed first, so its thread stops before the communicators go.
  std::unique_ptr<Watchdog> watchdog_;
};

}  // namespace nccl
}  // namespace distcomm
