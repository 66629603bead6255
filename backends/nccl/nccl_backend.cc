// The nccl backend's machinery: setup, communicators, streams, the issue path, faults.
// The ops themselves are in nccl_ops.cc.
#include "backends/nccl/nccl_backend.h"

#include "api/errors.h"
#include "backends/nccl/cuda_status.h"
#include "backends/nccl/nccl_types.h"
#include "backends/nccl/nccl_work.h"

namespace distcomm {
namespace nccl {
namespace {

int count_devices_or_throw() {
  std::string why;
  const int n = visible_cuda_devices(&why);
  if (n == 0) throw BackendUnavailable(why);
  return n;
}

}  // namespace

NcclBackend::NcclBackend(BackendOptions options)
    : Backend(std::move(options)),
      config_(NcclConfig::parse(this->options().config)),
      visible_devices_(count_devices_or_throw()) {
  if (config_.device_id >= visible_devices_) {
    throw InvalidArgument("nccl backend config device_id=" + std::to_string(config_.device_id) +
                          ": this process sees " + std::to_string(visible_devices_) + " CUDA device(s)");
  }
  watchdog_ = std::make_unique<Watchdog>([this](std::exception_ptr e) { record_fault(e); },
                                         config_.watchdog_poll);
  if (config_.eager_init) {
    std::lock_guard<std::mutex> lock(mu_);
    const int device = default_device();
    DeviceGuard guard(device);
    group_comm(device);
  }
}

NcclBackend::~NcclBackend() { shutdown(); }

std::vector<OpType> NcclBackend::supported_ops() const {
  // No recv_any_source: NCCL receives only from a named peer.
  return {OpType::kAllReduce, OpType::kBroadcast,     OpType::kReduce,   OpType::kAllGather,
          OpType::kGather,    OpType::kScatter,       OpType::kReduceScatter, OpType::kAllToAll,
          OpType::kBarrier,   OpType::kSend,          OpType::kRecv};
}

bool NcclBackend::reduces_natively(ReduceOp op, DType dtype) const { return nccl_reduces(op, dtype); }

void NcclBackend::shutdown() {
  {
    std::lock_guard<std::mutex> lock(fault_mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  // Aborts the communicators of ops still in flight, so the teardown below never waits.
  watchdog_->stop("the nccl backend of group '" + options().group_name +
                  "' was shut down while this op was in flight");
  std::lock_guard<std::mutex> lock(mu_);
  group_comms_.clear();
  pair_comms_.clear();
  for (auto& [device, s] : streams_) {
    try {
      DeviceGuard guard(device);
      if (s.barrier_scratch) cudaFree(s.barrier_scratch);
      if (s.ready) cudaEventDestroy(s.ready);
      if (s.stream) cudaStreamDestroy(s.stream);
    } catch (const Error&) {
      // The device is gone (the driver failed): nothing left to free on it.
    }
  }
  streams_.clear();
}

// ---------------------------------------------------------------------------------------
// Issue path

WorkPtr NcclBackend::launch(Launch l, const OpCalls& calls) {
  check_usable();
  const OpContext& ctx = *l.ctx;
  const std::string label = op_label(l.op, ctx, l.device);
  const cudaStream_t caller = l.caller_stream;  // cudaStream_t is CUstream_st*
  auto work = std::make_shared<NcclWork>(l.op, ctx, label, l.device, caller,
                                         l.blocking_wait || config_.blocking_wait, std::move(l.tensors));
  std::shared_ptr<NcclComm> comm;
  try {
    std::lock_guard<std::mutex> lock(mu_);
    DeviceGuard guard(l.device);
    last_device_ = l.device;
    comm = l.peer >= 0 ? pair_comm(l.device, l.peer) : group_comm(l.device);
    DeviceStreams& s = streams(l.device);
    // Order the internal stream behind what the caller queued so far (the event is reused:
    // a wait takes the event's state at the time of the call).
    check_cuda(cudaEventRecord(s.ready, caller), "cudaEventRecord");
    check_cuda(cudaStreamWaitEvent(s.stream, s.ready, 0), "cudaStreamWaitEvent");
    const auto deadline = ctx.timeout > std::chrono::milliseconds::zero()
                              ? NcclComm::Clock::now() + ctx.timeout
                              : NcclComm::Clock::time_point::max();
    comm->enqueue(label, [&](ncclComm_t c, ncclRedOp_t redop) { return calls(c, redop, s.stream); },
                  deadline, l.reduction ? &*l.reduction : nullptr);
    work->record_end(s.stream);
  } catch (...) {
    // Arguments were checked before: a failure here (a communicator that could not be set
    // up, an op NCCL refused or did not take in time) leaves this rank out of step with
    // the others, so the group cannot go on.
    auto error = std::current_exception();
    record_fault(error);
    work->complete(error);
    return work;
  }
  watchdog_->track(comm, work, ctx.timeout);
  return work;
}

std::shared_ptr<NcclComm> NcclBackend::group_comm(int device) {
  auto it = group_comms_.find(device);
  if (it != group_comms_.end()) return it->second;
  // Every rank creates its communicators in the same order (the order of its ops), so a
  // counter names the store key all of them agree on.
  const int n = comms_created_++;
  NcclComm::Setup s;
  s.store = options().store.get();
  s.key = "nccl/comm" + std::to_string(n) + "/unique_id";
  s.rank = rank();
  s.size = size();
  s.device = device;
  s.nonblocking = config_.nonblocking;
  s.timeout = options().timeout;
  s.label = "NCCL communicator #" + std::to_string(n) + " of group '" + options().group_name + "' on cuda:" +
            std::to_string(device);
  auto comm = NcclComm::create(s);
  group_comms_[device] = comm;
  return comm;
}

std::shared_ptr<NcclComm> NcclBackend::pair_comm(int device, int peer) {
  auto it = pair_comms_.find(peer);
  if (it != pair_comms_.end()) return it->second;  // on `device`: check_pair_device said so
  const int lo = std::min(rank(), peer);
  const int hi = std::max(rank(), peer);
  NcclComm::Setup s;
  s.store = options().store.get();
  s.key = "nccl/p2p" + std::to_string(lo) + "-" + std::to_string(hi) + "/unique_id";
  s.rank = rank() == lo ? 0 : 1;
  s.size = 2;
  s.device = device;
  s.nonblocking = config_.nonblocking;
  s.timeout = options().timeout;
  s.label = "NCCL communicator of ranks " + std::to_string(lo) + " and " + std::to_string(hi) + " of group '" +
            options().group_name + "' on cuda:" + std::to_string(device);
  auto comm = NcclComm::create(s);
  pair_comms_[peer] = comm;
  return comm;
}

NcclBackend::DeviceStreams& NcclBackend::streams(int device) {
  DeviceStreams& s = streams_[device];
  if (!s.stream) {
    // Non-blocking: the internal stream must not synchronise with the legacy stream by
    // itself, only through the events distcomm records.
    check_cuda(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    check_cuda(cudaEventCreateWithFlags(&s.ready, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  }
  return s;
}

// ---------------------------------------------------------------------------------------
// Checks and faults

int NcclBackend::device_of(OpType op, const Tensor& t) const {
  if (!t.is_cuda()) {
    throw InvalidArgument(std::string("nccl backend: ") + op_type_name(op) + " got a tensor on " +
                          t.device().str() + "; NCCL moves CUDA tensors only");
  }
  if (t.device().index < 0 || t.device().index >= visible_devices_) {
    throw InvalidArgument(std::string("nccl backend: ") + op_type_name(op) + " got a tensor on " +
                          t.device().str() + " but this process sees " + std::to_string(visible_devices_) +
                          " CUDA device(s)");
  }
  return t.device().index;
}

int NcclBackend::same_device(OpType op, const Tensor& a, const Tensor& b) const {
  const int device = device_of(op, a);
  if (device_of(op, b) != device) {
    throw InvalidArgument(std::string("nccl backend: ") + op_type_name(op) + " got tensors on " +
                          a.device().str() + " and " + b.device().str() + "; they must share one device");
  }
  return device;
}

void NcclBackend::check_pair_device(OpType op, int peer, int device) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pair_comms_.find(peer);
  if (it != pair_comms_.end() && it->second->device() != device) {
    throw InvalidArgument(std::string("nccl backend: ") + op_type_name(op) + " with rank " + std::to_string(peer) +
                          " on cuda:" + std::to_string(device) + ", but this pair of ranks already exchanges on cuda:" +
                          std::to_string(it->second->device()) + " (one device per pair of ranks)");
  }
}

int NcclBackend::default_device() const {
  if (config_.device_id >= 0) return config_.device_id;
  if (last_device_ >= 0) return last_device_;
  // One GPU per rank on each host is the usual layout. Without the local rank, the world
  // rank stands in for it (right on one host).
  if (config_.local_rank >= 0) return config_.local_rank % visible_devices_;
  const int global = options().global_ranks.empty() ? rank() : options().global_ranks[rank()];
  return global % visible_devices_;
}

NcclBackend::Launch NcclBackend::reducing(OpType op, const OpContext& ctx, int device, CUstream_st* caller_stream,
                                           std::vector<Tensor> tensors, ReduceOp rop, DType dtype) const {
  std::string why;
  if (!nccl_reduces(rop, dtype, &why)) throw InvalidArgument(std::string(op_type_name(op)) + ": " + why);
  Launch l{op, &ctx, device, caller_stream, std::move(tensors)};
  l.reduction = NcclComm::Reduction{rop, dtype};
  return l;
}

void NcclBackend::check_usable() const {
  std::lock_guard<std::mutex> lock(fault_mu_);
  if (fault_) std::rethrow_exception(fault_);
  if (shut_down_) {
    throw PeerFailure("the nccl backend of group '" + options().group_name + "' was shut down");
  }
}

void NcclBackend::record_fault(std::exception_ptr error) {
  std::lock_guard<std::mutex> lock(fault_mu_);
  if (!fault_) fault_ = error;
}

std::string NcclBackend::op_label(OpType op, const OpContext& ctx, int device) const {
  // The ProcessGroup's description already names rank, group, op and seq; a direct caller
  // of the backend may not have given one.
  if (!ctx.description.empty()) return ctx.description;
  return "rank " + std::to_string(rank()) + "/" + std::to_string(size()) + " group '" + options().group_name +
         "' " + op_type_name(op) + " #" + std::to_string(ctx.seq) + " on cuda:" + std::to_string(device);
}

}  // namespace nccl
}  // namespace distcomm
