// The nccl backend's machinery: setup, communicators, the issue path, shutdown, faults.
// The ops themselves are in nccl_ops.cc.
#include "backends/nccl/nccl_backend.h"

#include "api/cuda_stream.h"
#include "api/errors.h"
#include "api/group/init_wait.h"
#include "api/store/prefix_store.h"
#include "backends/nccl/cuda_status.h"
#include "backends/nccl/nccl_types.h"
#include "backends/nccl/nccl_work.h"
#include "backends/nccl/op_checks.h"
#include "backends/nccl/op_issue.h"
#include "backends/nccl/polling.h"
#include "backends/nccl/subgroup_split.h"
#include "backends/nccl/unique_id_exchange.h"

namespace distcomm {
namespace nccl {
namespace {

int count_devices_or_throw() {
  std::string why;
  const int n = visible_cuda_devices(&why);
  if (n == 0) throw BackendUnavailable(why);
  return n;
}

// How long closing the communicators may take once no op is in flight, and how long a
// fault waits for their aborts.
constexpr std::chrono::milliseconds kCloseTime{10000};

// For a rank waiting for rank 0's ncclUniqueId: "" while no other rank of the group has
// published a failure, else what that rank published (bounded reads of the board).
std::function<std::string()> published_failure(const std::shared_ptr<GroupFailure>& failure) {
  return [failure]() -> std::string {
    if (!failure->peer_has_failed()) return "";
    const auto record = failure->published(std::chrono::milliseconds(500));
    if (!record) return "another rank of the group has published its failure";
    return "rank " + std::to_string(record->rank) + " of the group has published its failure: " + record->message;
  };
}

}  // namespace

NcclBackend::NcclBackend(BackendOptions options, const SplitFrom* split)
    : Backend(std::move(options)),
      config_(NcclConfig::parse(this->options().config)),
      visible_devices_(count_devices_or_throw()),
      key_prefix_(fresh_key_prefix(*this->options().store, rank())),
      // Failure records go under the fresh prefix too: a store reused by a group of the
      // same name must not show this group an earlier one's failure.
      failure_(std::make_shared<GroupFailure>(rank(), std::make_shared<PrefixStore>(key_prefix_, this->options().store))),
      // The group's first failure aborts every communicator (the watchdog's abort hook),
      // so that no local thread and no peer stays blocked on one.
      watchdog_(std::make_unique<Watchdog>(
          failure_, config_.watchdog_poll,
          [comms = comms_] {
            const auto all = comms->all();
            return std::vector<std::shared_ptr<WatchedComm>>(all.begin(), all.end());
          },
          kCloseTime)) {
  name_world_ranks(*failure_, this->options().global_ranks);
  if (config_.device_id >= visible_devices_) {
    throw InvalidArgument("nccl backend config device_id=" + std::to_string(config_.device_id) +
                          ": this process sees " + std::to_string(visible_devices_) + " CUDA device(s)");
  }
  // Setup done now is part of the group's creation: it gets what is left of the creation's
  // one deadline (init_wait.h), not a timeout of its own.
  const std::chrono::milliseconds creation_left =
      InitWait::for_backend(this->options().config, this->options().timeout, "nccl").left();
  if (split) {
    // Now, not at the first op: the parent's ranks outside this subgroup are in the split.
    last_device_ = split->parent->device();
    group_comm(split->parent->device(), split)->initialize(creation_left);
  }
  if (config_.eager_init) group_comm(default_device())->initialize(creation_left);
}

Backend* NcclBackend::create_subgroup_backend(const BackendOptions* sub, const std::vector<int>& members) {
  // Every rank of this group must decide alike, and what a rank finds by itself is not
  // shared state: its communicator #0 is set up by its first op, which another thread may
  // be issuing right now, so one rank could find it ready while another does not, and the
  // one that splits would wait out the timeout in ncclCommSplit. The ranks agree through
  // the store instead: the split is made only when every rank can take part.
  const int device = first_comm_device_;
  const std::shared_ptr<NcclComm> parent = device >= 0 ? comms_->find("group on cuda:" + std::to_string(device)) : nullptr;
  bool can = parent && parent->usable();
  if (can) {
    try {
      failure_->check_usable();
    } catch (const std::exception&) {
      can = false;  // a failed group cannot take part in a split; the others are told below
    }
  }
  const std::string asking = group_rank_text(rank(), size(), options().group_name, options().global_ranks) +
                             " making subgroup #" + std::to_string(subgroups_asked_);
  // Called in the same order on every rank (Backend::create_subgroup_backend), so the count
  // names the same vote on all of them. The vote is part of making the subgroup: it has the
  // creation's deadline (the one the new communicator's setup gets), not an op's timeout.
  const auto creation_deadline = std::chrono::steady_clock::now() +
      InitWait::for_backend(this->options().config, this->options().timeout, "nccl").left();
  if (!every_rank_can_split(*options().store, key_prefix_, subgroups_asked_++, size(), can, creation_deadline,
                            asking)) {
    return nullptr;  // some rank's communicator is not set up yet: the store path, on all
  }
  const SplitPart part = split_part(rank(), members, sub != nullptr);
  const std::string what = group_rank_text(rank(), size(), options().group_name, options().global_ranks) +
                           " making a subgroup of its ranks " + [&] {
                             std::string list;
                             for (int m : members) list += (list.empty() ? "" : ",") + std::to_string(m);
                             return "[" + list + "]";
                           }();
  try {
    if (!sub) {
      parent->split(part.color, part.key, what, deadline_after(this->options().timeout));
      return nullptr;
    }
    SplitFrom split{parent, part.color, part.key};
    return new NcclBackend(*sub, &split);
  } catch (...) {
    // The ranks are out of step, or the communicator was aborted: this group cannot go on.
    std::rethrow_exception(failure_->record(std::current_exception(), what));
  }
}

NcclBackend::~NcclBackend() { shutdown(); }

std::vector<OpType> NcclBackend::supported_ops() const {
  // No recv_any_source: NCCL receives only from a named peer.
  return {OpType::kAllReduce, OpType::kBroadcast,     OpType::kReduce,   OpType::kAllGather,
          OpType::kGather,    OpType::kScatter,       OpType::kReduceScatter, OpType::kAllToAll,
          OpType::kBarrier,   OpType::kSend,          OpType::kRecv,     OpType::kBatchP2P,
          OpType::kAllReduceCoalesced};
}

std::vector<OpType> NcclBackend::list_ops() const {
  return {OpType::kAllGather, OpType::kGather, OpType::kScatter, OpType::kReduceScatter, OpType::kAllToAll};
}

bool NcclBackend::reduces_natively(ReduceOp op, DType dtype) const { return nccl_reduces(op, dtype); }

void NcclBackend::shutdown() { end(Ending::kDestroy); }

void NcclBackend::abort() { end(Ending::kAbort); }

void NcclBackend::end(Ending how) {
  EndingSettings s;
  s.backend = "the nccl backend of group '" + options().group_name + "'";
  s.grace = config_.shutdown_grace;
  s.close_time = kCloseTime;
  // Once; an abort during a destroy on another thread hurries that destroy's closes.
  if (!ending_.end(how, s, *failure_, *watchdog_, *comms_)) return;
  std::lock_guard<std::mutex> lock(scratch_mu_);
  for (auto& [device, scratch] : barrier_scratch_) {
    try {
      DeviceGuard guard(device);
      cudaFree(scratch);
    } catch (const Error&) {
      // The device is gone (the driver failed): nothing left to free on it.
    }
  }
  barrier_scratch_.clear();
}

// ---------------------------------------------------------------------------------------
// Issue path

WorkPtr NcclBackend::launch(Launch l, const CommFor& comm_for, const NcclComm::Calls& calls) {
  const OpContext& ctx = *l.ctx;
  cudaStream_t caller = nullptr;
  OpIssue<NcclComm, NcclWork> op;
  op.failure = failure_.get();
  op.watchdog = watchdog_.get();
  op.timeout = ctx.timeout;
  op.check = [&] { caller = checked_caller_stream(l.op, l.device, l.option_stream); };
  op.comm = comm_for;
  op.work = [&](const std::shared_ptr<NcclComm>& comm) {
    return std::make_shared<NcclWork>(l.op, ctx, op_label(l.op, ctx, l.device), comm, l.device, caller,
                                      l.blocking_wait || config_.blocking_wait, std::move(l.tensors));
  };
  op.issue = [&](NcclComm& comm, NcclWork& work) {
    DeviceGuard guard(l.device);
    last_device_ = l.device;
    comm.initialize(ctx.timeout);
    comm.enqueue(work.label(), caller, calls, deadline_after(ctx.timeout), l.reduction ? &*l.reduction : nullptr);
    work.record_end(comm);
  };
  return issue_op(op);
}

WorkPtr NcclBackend::launch_batch(Launch l, const std::vector<int>& peers, const PairCalls& calls) {
  const OpContext& ctx = *l.ctx;
  const std::vector<int> order = pair_setup_order(peers);
  cudaStream_t caller = nullptr;
  OpIssue<CommSet<NcclComm>, NcclWork> op;
  op.failure = failure_.get();
  op.watchdog = watchdog_.get();
  op.timeout = ctx.timeout;
  op.check = [&] { caller = checked_caller_stream(l.op, l.device, l.option_stream); };
  op.comm = [&] {
    std::vector<std::shared_ptr<NcclComm>> pairs;
    for (int peer : order) pairs.push_back(pair_comm(l.op, l.device, peer));
    return std::make_shared<CommSet<NcclComm>>(std::move(pairs), kCloseTime);
  };
  op.work = [&](const std::shared_ptr<CommSet<NcclComm>>& set) {
    return std::make_shared<NcclWork>(l.op, ctx, op_label(l.op, ctx, l.device), set, l.device, caller,
                                      l.blocking_wait || config_.blocking_wait, std::move(l.tensors));
  };
  op.issue = [&](CommSet<NcclComm>& set, NcclWork& work) {
    DeviceGuard guard(l.device);
    last_device_ = l.device;
    // One after the other in pair order: no circle of ranks waiting for each other.
    for (auto& pair : set.members()) pair->initialize(ctx.timeout);
    std::vector<NcclComm::Part> parts;
    for (size_t i = 0; i < order.size(); ++i) {
      const int peer = order[i];
      const int peer_in_pair = peer < rank() ? 0 : 1;  // the pair's communicator ranks the lower rank 0
      parts.push_back({set.members()[i].get(), [&calls, peer, peer_in_pair](ncclComm_t c, ncclRedOp_t, cudaStream_t s) {
                         return calls(peer, peer_in_pair, c, s);
                       }});
    }
    NcclComm::enqueue_together(work.label(), caller, parts, deadline_after(ctx.timeout));
    for (auto& pair : set.members()) work.record_end(*pair);
  };
  return issue_op(op);
}

cudaStream_t NcclBackend::checked_caller_stream(OpType op, int device, CUstream_st* option_stream) const {
  const cudaStream_t stream = option_stream ? option_stream : current_cuda_stream();  // CUstream_st* both
  // The legacy default stream (nullptr) is the current device's: ask with the op's.
  DeviceGuard guard(device);
  // Capture first: cudaStreamIsCapturing is allowed on a capturing stream, while
  // cudaStreamGetDevice there fails and invalidates the user's capture (seen on an H200).
  check_not_capturing(op, stream_capture(stream));
  check_stream_device(op, device, stream_device(stream));
  return stream;
}

std::shared_ptr<NcclComm> NcclBackend::group_comm(int device, const SplitFrom* split) {
  return comms_->get_or_make("group on cuda:" + std::to_string(device), [&] {
    // Every rank makes its communicators in the same order (the order of its ops), so a
    // counter names the store key all of them agree on.
    const int n = group_comms_made_++;
    if (n == 0) first_comm_device_ = device;
    NcclComm::Setup s;
    s.store = options().store.get();
    s.key = key_prefix_ + "comm" + std::to_string(n) + "/unique_id";
    s.rank = rank();
    s.size = size();
    s.device = device;
    s.nonblocking = config_.nonblocking;
    s.peer_failure = published_failure(failure_);
    s.label = "NCCL communicator #" + std::to_string(n) + " of group '" + options().group_name + "' on cuda:" +
              std::to_string(device);
    if (split) {
      s.split_from = split->parent;
      s.split_color = split->color;
      s.split_key = split->key;
      s.label += " (split from " + split->parent->label() + ")";
    }
    return std::make_shared<NcclComm>(s);
  });
}

std::shared_ptr<NcclComm> NcclBackend::pair_comm(OpType op, int device, int peer) {
  const int lo = std::min(rank(), peer);
  const int hi = std::max(rank(), peer);
  auto comm = comms_->get_or_make("pair with rank " + std::to_string(peer), [&] {
    NcclComm::Setup s;
    s.store = options().store.get();
    s.key = key_prefix_ + "p2p" + std::to_string(lo) + "-" + std::to_string(hi) + "/unique_id";
    s.rank = rank() == lo ? 0 : 1;
    s.size = 2;
    s.device = device;
    s.nonblocking = config_.nonblocking;
    s.peer_failure = published_failure(failure_);
    s.label = "NCCL communicator of ranks " + std::to_string(lo) + " and " + std::to_string(hi) + " of group '" +
              options().group_name + "' on cuda:" + std::to_string(device);
    return std::make_shared<NcclComm>(s);
  });
  if (comm->device() != device) {
    throw InvalidArgument(std::string("nccl backend: ") + op_type_name(op) + " with rank " + std::to_string(peer) +
                          " on cuda:" + std::to_string(device) + ", but this pair of ranks already exchanges on cuda:" +
                          std::to_string(comm->device()) + " (one device per pair of ranks)");
  }
  return comm;
}

void* NcclBackend::barrier_scratch(int device) {
  std::lock_guard<std::mutex> lock(scratch_mu_);
  void*& scratch = barrier_scratch_[device];
  if (!scratch) {
    DeviceGuard guard(device);
    RelaxedCaptureMode relaxed;  // a cudaMalloc would break another thread's global-mode capture
    check_cuda(cudaMalloc(&scratch, sizeof(float)), "cudaMalloc");
  }
  return scratch;
}

// ---------------------------------------------------------------------------------------
// Checks and faults

int NcclBackend::device_of(OpType op, const Tensor& t) const { return cuda_device_of(op, t, visible_devices_); }

int NcclBackend::same_device(OpType op, const Tensor& a, const Tensor& b) const {
  return same_cuda_device(op, a, b, visible_devices_);
}

int NcclBackend::list_device(OpType op, const Tensor& first, const std::vector<Tensor>& list) const {
  return list_cuda_device(op, first, list, visible_devices_);
}

int NcclBackend::default_device() const {
  if (config_.device_id >= 0) return config_.device_id;
  const int last = last_device_;
  if (last >= 0) return last;
  // One GPU per rank on each host is the usual layout. Without the local rank, the world
  // rank stands in for it (right on one host).
  if (config_.local_rank >= 0) return config_.local_rank % visible_devices_;
  const int global = options().global_ranks.empty() ? rank() : options().global_ranks[rank()];
  return global % visible_devices_;
}

NcclBackend::Launch NcclBackend::reducing(OpType op, const OpContext& ctx, int device, CUstream_st* option_stream,
                                           std::vector<Tensor> tensors, ReduceOp rop, DType dtype) const {
  std::string why;
  if (!nccl_reduces(rop, dtype, &why)) throw InvalidArgument(std::string(op_type_name(op)) + ": " + why);
  Launch l{op, &ctx, device, option_stream, std::move(tensors)};
  l.reduction = NcclComm::Reduction{rop, dtype};
  return l;
}

std::string NcclBackend::op_label(OpType op, const OpContext& ctx, int device) const {
  // The ProcessGroup's description already names rank, group, op and seq; a direct caller
  // of the backend may not have given one.
  if (!ctx.description.empty()) return ctx.description;
  return group_rank_text(rank(), size(), options().group_name, options().global_ranks) + " " + op_type_name(op) +
         " #" + std::to_string(ctx.seq) + " on cuda:" + std::to_string(device);
}

}  // namespace nccl
}  // namespace distcomm
