// The nccl backend's ops: arguments checked, then NCCL calls issued through launch().
// The ProcessGroup has validated shapes, roots and peers; what is checked here is what
// only NCCL imposes (CUDA tensors on a visible device, reductions NCCL has).
//
// gather, scatter and all_to_all are grouped ncclSend/ncclRecv rather than NCCL's own
// ncclGather/ncclScatter/ncclAlltoAll, which exist only in recent NCCL and take equal
// counts; all_to_all needs per-rank counts.
#include "api/errors.h"
#include "backends/nccl/cuda_status.h"
#include "backends/nccl/nccl_blocks.h"
#include "backends/nccl/nccl_backend.h"
#include "backends/nccl/nccl_types.h"

namespace distcomm {
namespace nccl {

WorkPtr NcclBackend::all_reduce(Tensor& tensor, const AllReduceOptions& opts, const OpContext& ctx) {
  const int device = device_of(OpType::kAllReduce, tensor);
  Launch l = reducing(OpType::kAllReduce, ctx, device, opts.cuda_stream, {tensor}, opts.op, tensor.dtype());
  return launch(std::move(l), [&] { return group_comm(device); }, [&](ncclComm_t comm, ncclRedOp_t redop, cudaStream_t s) {
    if (tensor.numel() == 0) return ncclSuccess;  // every rank skips: no null buffer for NCCL
    return ncclAllReduce(tensor.data(), tensor.data(), count_of(tensor), nccl_dtype(tensor.dtype()), redop, comm, s);
  });
}

WorkPtr NcclBackend::all_reduce_coalesced(std::vector<Tensor>& tensors, const AllReduceOptions& opts,
                                          const OpContext& ctx) {
  constexpr OpType kOp = OpType::kAllReduceCoalesced;
  const int device = list_device(kOp, tensors.front(), tensors);
  Launch l = reducing(kOp, ctx, device, opts.cuda_stream, tensors, opts.op, tensors.front().dtype());
  // enqueue() puts the calls in one ncclGroupStart/ncclGroupEnd: NCCL launches them together.
  return launch(std::move(l), [&] { return group_comm(device); }, [&](ncclComm_t comm, ncclRedOp_t redop, cudaStream_t s) {
    ncclResult_t r = ncclSuccess;
    for (size_t i = 0; i < tensors.size() && r == ncclSuccess; ++i) {
      const Tensor& t = tensors[i];
      if (t.numel() == 0) continue;  // every rank skips: no null buffer for NCCL
      r = ncclAllReduce(t.data(), t.data(), count_of(t), nccl_dtype(t.dtype()), redop, comm, s);
    }
    return r;
  });
}

WorkPtr NcclBackend::broadcast(Tensor& tensor, const BroadcastOptions& opts, const OpContext& ctx) {
  const int device = device_of(OpType::kBroadcast, tensor);
  return launch({OpType::kBroadcast, &ctx, device, opts.cuda_stream, {tensor}}, [&] { return group_comm(device); },
                [&](ncclComm_t comm, ncclRedOp_t, cudaStream_t s) {
                  if (tensor.numel() == 0) return ncclSuccess;  // every rank skips: no null buffer for NCCL
                  return ncclBroadcast(tensor.data(), tensor.data(), count_of(tensor), nccl_dtype(tensor.dtype()),
                                       opts.root, comm, s);
                });
}

WorkPtr NcclBackend::reduce(Tensor& tensor, const ReduceOptions& opts, const OpContext& ctx) {
  const int device = device_of(OpType::kReduce, tensor);
  Launch l = reducing(OpType::kReduce, ctx, device, opts.cuda_stream, {tensor}, opts.op, tensor.dtype());
  // In place: NCCL writes the receive buffer on the root only, so other ranks' tensors
  // stay as they were.
  return launch(std::move(l), [&] { return group_comm(device); }, [&](ncclComm_t comm, ncclRedOp_t redop, cudaStream_t s) {
    if (tensor.numel() == 0) return ncclSuccess;  // every rank skips: no null buffer for NCCL
    return ncclReduce(tensor.data(), tensor.data(), count_of(tensor), nccl_dtype(tensor.dtype()), redop, opts.root,
                      comm, s);
  });
}

WorkPtr NcclBackend::all_gather(Tensor& output, const Tensor& input, const AllGatherOptions& opts,
                                const OpContext& ctx) {
  const int device = same_device(OpType::kAllGather, output, input);
  return launch({OpType::kAllGather, &ctx, device, opts.cuda_stream, {output, input}}, [&] { return group_comm(device); },
                [&](ncclComm_t comm, ncclRedOp_t, cudaStream_t s) {
                  if (input.numel() == 0) return ncclSuccess;  // every rank skips: no null buffer for NCCL
                  return ncclAllGather(input.data(), output.data(), count_of(input), nccl_dtype(input.dtype()), comm, s);
                });
}

WorkPtr NcclBackend::reduce_scatter(Tensor& output, const Tensor& input, const ReduceScatterOptions& opts,
                                    const OpContext& ctx) {
  const int device = same_device(OpType::kReduceScatter, output, input);
  Launch l = reducing(OpType::kReduceScatter, ctx, device, opts.cuda_stream, {output, input}, opts.op,
                      output.dtype());
  return launch(std::move(l), [&] { return group_comm(device); }, [&](ncclComm_t comm, ncclRedOp_t redop, cudaStream_t s) {
    if (output.numel() == 0) return ncclSuccess;  // every rank skips: no null buffer for NCCL
    return ncclReduceScatter(input.data(), output.data(), count_of(output), nccl_dtype(output.dtype()), redop, comm, s);
  });
}

WorkPtr NcclBackend::gather(Tensor& output, const Tensor& input, const GatherOptions& opts, const OpContext& ctx) {
  const bool root = rank() == opts.root;
  const int device = root ? same_device(OpType::kGather, output, input) : device_of(OpType::kGather, input);
  const int64_t n = input.numel();
  const DType dtype = input.dtype();
  return launch({OpType::kGather, &ctx, device, opts.cuda_stream, {output, input}}, [&] { return group_comm(device); },
                [&](ncclComm_t comm, ncclRedOp_t, cudaStream_t s) {
                  ncclResult_t r = send_block(block_at(input, 0), n, dtype, opts.root, comm, s);
                  for (int peer = 0; root && peer < size() && r == ncclSuccess; ++peer) {
                    r = recv_block(block_at(output, peer * n), n, dtype, peer, comm, s);
                  }
                  return r;
                });
}

WorkPtr NcclBackend::scatter(Tensor& output, const Tensor& input, const ScatterOptions& opts,
                             const OpContext& ctx) {
  const bool root = rank() == opts.root;
  const int device = root ? same_device(OpType::kScatter, output, input) : device_of(OpType::kScatter, output);
  const int64_t n = output.numel();
  const DType dtype = output.dtype();
  return launch({OpType::kScatter, &ctx, device, opts.cuda_stream, {output, input}}, [&] { return group_comm(device); },
                [&](ncclComm_t comm, ncclRedOp_t, cudaStream_t s) {
                  ncclResult_t r = ncclSuccess;
                  for (int peer = 0; root && peer < size() && r == ncclSuccess; ++peer) {
                    r = send_block(block_at(input, peer * n), n, dtype, peer, comm, s);
                  }
                  return r == ncclSuccess ? recv_block(block_at(output, 0), n, dtype, opts.root, comm, s) : r;
                });
}

WorkPtr NcclBackend::all_to_all(Tensor& output, const Tensor& input, const std::vector<int64_t>& output_counts,
                                const std::vector<int64_t>& input_counts, const AllToAllOptions& opts,
                                const OpContext& ctx) {
  const int device = same_device(OpType::kAllToAll, output, input);
  const DType dtype = input.dtype();
  return launch({OpType::kAllToAll, &ctx, device, opts.cuda_stream, {output, input}}, [&] { return group_comm(device); },
                [&](ncclComm_t comm, ncclRedOp_t, cudaStream_t s) {
                  ncclResult_t r = ncclSuccess;
                  int64_t in_offset = 0, out_offset = 0;
                  for (int peer = 0; peer < size() && r == ncclSuccess; ++peer) {
                    r = send_block(block_at(input, in_offset), input_counts[peer], dtype, peer, comm, s);
                    if (r == ncclSuccess) r = recv_block(block_at(output, out_offset), output_counts[peer], dtype, peer, comm, s);
                    in_offset += input_counts[peer];
                    out_offset += output_counts[peer];
                  }
                  return r;
                });
}

WorkPtr NcclBackend::barrier(const BarrierOptions& opts, const OpContext& ctx) {
  // One float on the device to all-reduce: NCCL has no barrier, and an all_reduce ends on
  // no rank before every rank has started it.
  const int device = default_device();
  void* scratch = barrier_scratch(device);
  Launch l{OpType::kBarrier, &ctx, device, opts.cuda_stream, {}};
  l.blocking_wait = true;  // a barrier holds the host, as c10d's does
  return launch(std::move(l), [&] { return group_comm(device); }, [scratch](ncclComm_t comm, ncclRedOp_t, cudaStream_t s) {
    return ncclAllReduce(scratch, scratch, 1, ncclFloat32, ncclSum, comm, s);
  });
}

// NCCL matches sends and receives between two ranks in issue order; it has no tags, so
// P2POptions::tag is not used.
WorkPtr NcclBackend::send(const Tensor& tensor, int dst, const P2POptions& opts, const OpContext& ctx) {
  return point_to_point(OpType::kSend, tensor, dst, opts, ctx);
}

WorkPtr NcclBackend::recv(Tensor& tensor, int src, const P2POptions& opts, const OpContext& ctx) {
  return point_to_point(OpType::kRecv, tensor, src, opts, ctx);
}

WorkPtr NcclBackend::point_to_point(OpType op, const Tensor& tensor, int peer, const P2POptions& opts,
                                    const OpContext& ctx) {
  const int device = device_of(op, tensor);
  // The pair's communicator ranks the lower group rank 0.
  const int peer_in_pair = peer < rank() ? 0 : 1;
  return launch({op, &ctx, device, opts.cuda_stream, {tensor}}, [&] { return pair_comm(op, device, peer); },
                [&](ncclComm_t c, ncclRedOp_t, cudaStream_t s) {
                  return op == OpType::kSend
                             ? send_all(tensor, peer_in_pair, c, s)
                             : recv_all(tensor, peer_in_pair, c, s);
                });
}

WorkPtr NcclBackend::batch_p2p(std::vector<P2POp>& ops, const P2POptions& opts, const OpContext& ctx) {
  const int device = device_of(OpType::kBatchP2P, ops.front().tensor);
  std::vector<Tensor> held;
  for (const P2POp& op : ops) {
    if (device_of(OpType::kBatchP2P, op.tensor) != device) {
      throw InvalidArgument("nccl backend: batch_isend_irecv has tensors on cuda:" + std::to_string(device) +
                            " and " + op.tensor.device().str() + "; a batch runs on one device");
    }
    held.push_back(op.tensor);
  }
  std::vector<int> peers;
  for (const P2POp& op : ops) peers.push_back(op.peer);
  // Each peer's sends and receives in batch order on the pair's communicator (NCCL pairs
  // them in issue order, as separate send and recv calls would be); all of them in one
  // group, so their order across peers does not matter.
  return launch_batch({OpType::kBatchP2P, &ctx, device, opts.cuda_stream, std::move(held)}, peers,
                      [&](int peer, int peer_in_pair, ncclComm_t c, cudaStream_t s) {
                        ncclResult_t r = ncclSuccess;
                        for (size_t i = 0; i < ops.size() && r == ncclSuccess; ++i) {
                          if (ops[i].peer != peer) continue;
                          const Tensor& t = ops[i].tensor;
                          r = ops[i].kind == P2POp::Kind::kSend
                                  ? send_all(t, peer_in_pair, c, s)
                                  : recv_all(t, peer_in_pair, c, s);
                        }
                        return r;
                      });
}

}  // namespace nccl
}  // namespace distcomm
