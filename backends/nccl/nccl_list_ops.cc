// The list forms of the nccl backend (Backend::list_ops, ABI 1.6). The ProcessGroup packs a
// list of host tensors into one and runs the flat op; CUDA tensors it cannot pack, so they
// come here whole. Each op is one NCCL group (launch() wraps the calls in
// ncclGroupStart/End) moving every block straight between the callers' tensors: no staging
// buffer, no copy kernel, one end event.
//
// The core has checked the lists (one tensor per rank, each of the single tensor's dtype
// and count, the root's only for gather and scatter; all_to_all's of one dtype, any
// counts); what is checked here is that they share one CUDA device.
#include "api/errors.h"
#include "backends/nccl/nccl_backend.h"
#include "backends/nccl/nccl_blocks.h"
#include "backends/nccl/nccl_types.h"

namespace distcomm {
namespace nccl {
namespace {

// The tensors an op holds until it ends: one, then a list.
std::vector<Tensor> held(const Tensor& one, const std::vector<Tensor>& list) {
  std::vector<Tensor> all{one};
  all.insert(all.end(), list.begin(), list.end());
  return all;
}

}  // namespace

// One ncclBroadcast per rank, rank k's input into every rank's outputs[k]. (NCCL's
// ncclAllGather writes one contiguous buffer; the outputs are the caller's, anywhere.)
WorkPtr NcclBackend::all_gather_list(std::vector<Tensor>& outputs, const Tensor& input, const AllGatherOptions& opts,
                                     const OpContext& ctx) {
  constexpr OpType kOp = OpType::kAllGather;
  const int device = list_device(kOp, input, outputs);
  return launch({kOp, &ctx, device, opts.cuda_stream, held(input, outputs)}, [&] { return group_comm(device); },
                [&](ncclComm_t comm, ncclRedOp_t, cudaStream_t s) {
                  ncclResult_t r = ncclSuccess;
                  if (input.numel() == 0) return r;  // every rank skips: no null buffer for NCCL
                  for (int k = 0; k < size() && r == ncclSuccess; ++k) {
                    // The send buffer is read on the root only.
                    r = ncclBroadcast(input.data(), outputs[k].data(), count_of(input), nccl_dtype(input.dtype()), k,
                                      comm, s);
                  }
                  return r;
                });
}

// One ncclReduce per rank: every rank's inputs[k] reduced into rank k's output.
WorkPtr NcclBackend::reduce_scatter_list(Tensor& output, const std::vector<Tensor>& inputs,
                                         const ReduceScatterOptions& opts, const OpContext& ctx) {
  constexpr OpType kOp = OpType::kReduceScatter;
  const int device = list_device(kOp, output, inputs);
  Launch l = reducing(kOp, ctx, device, opts.cuda_stream, held(output, inputs), opts.op, output.dtype());
  return launch(std::move(l), [&] { return group_comm(device); }, [&](ncclComm_t comm, ncclRedOp_t redop, cudaStream_t s) {
    ncclResult_t r = ncclSuccess;
    if (output.numel() == 0) return r;  // every rank skips: no null buffer for NCCL
    for (int k = 0; k < size() && r == ncclSuccess; ++k) {
      // The receive buffer is written on the root only; elsewhere NCCL is given this
      // rank's own output, never the caller's input.
      r = ncclReduce(inputs[k].data(), output.data(), count_of(output), nccl_dtype(output.dtype()), redop, k, comm, s);
    }
    return r;
  });
}

// Every rank sends its input to the root (the root to itself too); the root receives
// rank k's into outputs[k].
WorkPtr NcclBackend::gather_list(std::vector<Tensor>& outputs, const Tensor& input, const GatherOptions& opts,
                                 const OpContext& ctx) {
  constexpr OpType kOp = OpType::kGather;
  const int device = list_device(kOp, input, outputs);  // outputs: empty off the root
  const bool root = rank() == opts.root;
  return launch({kOp, &ctx, device, opts.cuda_stream, held(input, outputs)}, [&] { return group_comm(device); },
                [&](ncclComm_t comm, ncclRedOp_t, cudaStream_t s) {
                  ncclResult_t r = send_all(input, opts.root, comm, s);
                  for (int k = 0; root && k < size() && r == ncclSuccess; ++k) r = recv_all(outputs[k], k, comm, s);
                  return r;
                });
}

// The root sends inputs[k] to rank k (itself too); every rank receives into its output.
WorkPtr NcclBackend::scatter_list(Tensor& output, const std::vector<Tensor>& inputs, const ScatterOptions& opts,
                                  const OpContext& ctx) {
  constexpr OpType kOp = OpType::kScatter;
  const int device = list_device(kOp, output, inputs);  // inputs: empty off the root
  const bool root = rank() == opts.root;
  return launch({kOp, &ctx, device, opts.cuda_stream, held(output, inputs)}, [&] { return group_comm(device); },
                [&](ncclComm_t comm, ncclRedOp_t, cudaStream_t s) {
                  ncclResult_t r = ncclSuccess;
                  for (int k = 0; root && k < size() && r == ncclSuccess; ++k) r = send_all(inputs[k], k, comm, s);
                  return r == ncclSuccess ? recv_all(output, opts.root, comm, s) : r;
                });
}

// inputs[k] to rank k, outputs[k] from rank k, every pair in one group (itself too).
WorkPtr NcclBackend::all_to_all_list(std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                                     const AllToAllOptions& opts, const OpContext& ctx) {
  constexpr OpType kOp = OpType::kAllToAll;
  const int device = list_device(kOp, inputs.front(), outputs);
  list_device(kOp, inputs.front(), inputs);
  std::vector<Tensor> tensors = held(inputs.front(), outputs);
  tensors.insert(tensors.end(), inputs.begin() + 1, inputs.end());
  return launch({kOp, &ctx, device, opts.cuda_stream, std::move(tensors)}, [&] { return group_comm(device); },
                [&](ncclComm_t comm, ncclRedOp_t, cudaStream_t s) {
                  ncclResult_t r = ncclSuccess;
                  for (int k = 0; k < size() && r == ncclSuccess; ++k) {
                    r = send_all(inputs[k], k, comm, s);
                    if (r == ncclSuccess) r = recv_all(outputs[k], k, comm, s);
                  }
                  return r;
                });
}

}  // namespace nccl
}  // namespace distcomm
