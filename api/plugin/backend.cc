#include "api/plugin/backend.h"

#include "api/errors.h"

namespace distcomm {

Backend::Backend(BackendOptions options) : options_(std::move(options)) {}

Backend::~Backend() = default;

bool Backend::reduces_natively(ReduceOp op, DType) const {
  return op.kind != ReduceOp::AVG && op.kind != ReduceOp::PREMUL_SUM;
}

void Backend::unsupported(OpType op) const {
  throw Unsupported("backend " + name() + " does not support " + op_type_name(op));
}

WorkPtr Backend::all_reduce(Tensor&, const AllReduceOptions&, const OpContext&) {
  unsupported(OpType::kAllReduce);
}
WorkPtr Backend::broadcast(Tensor&, const BroadcastOptions&, const OpContext&) {
  unsupported(OpType::kBroadcast);
}
WorkPtr Backend::reduce(Tensor&, const ReduceOptions&, const OpContext&) {
  unsupported(OpType::kReduce);
}
WorkPtr Backend::all_gather(Tensor&, const Tensor&, const AllGatherOptions&, const OpContext&) {
  unsupported(OpType::kAllGather);
}
WorkPtr Backend::gather(Tensor&, const Tensor&, const GatherOptions&, const OpContext&) {
  unsupported(OpType::kGather);
}
WorkPtr Backend::scatter(Tensor&, const Tensor&, const ScatterOptions&, const OpContext&) {
  unsupported(OpType::kScatter);
}
WorkPtr Backend::reduce_scatter(Tensor&, const Tensor&, const ReduceScatterOptions&, const OpContext&) {
  unsupported(OpType::kReduceScatter);
}
WorkPtr Backend::all_to_all(Tensor&, const Tensor&, const std::vector<int64_t>&,
                            const std::vector<int64_t>&, const AllToAllOptions&, const OpContext&) {
  unsupported(OpType::kAllToAll);
}
WorkPtr Backend::barrier(const BarrierOptions&, const OpContext&) { unsupported(OpType::kBarrier); }
WorkPtr Backend::batch_p2p(std::vector<P2POp>&, const P2POptions&, const OpContext&) {
  unsupported(OpType::kBatchP2P);
}
WorkPtr Backend::send(const Tensor&, int, const P2POptions&, const OpContext&) {
  unsupported(OpType::kSend);
}
WorkPtr Backend::recv(Tensor&, int, const P2POptions&, const OpContext&) {
  unsupported(OpType::kRecv);
}
WorkPtr Backend::recv_any_source(Tensor&, const P2POptions&, const OpContext&) {
  unsupported(OpType::kRecvAnySource);
}

void Backend::abort() { shutdown(); }

Backend* Backend::create_subgroup_backend(const BackendOptions*, const std::vector<int>&) { return nullptr; }

WorkPtr Backend::all_reduce_coalesced(std::vector<Tensor>&, const AllReduceOptions&, const OpContext&) {
  unsupported(OpType::kAllReduceCoalesced);
}
std::vector<OpType> Backend::list_ops() const { return {}; }
WorkPtr Backend::all_gather_list(std::vector<Tensor>&, const Tensor&, const AllGatherOptions&, const OpContext&) {
  unsupported(OpType::kAllGather);
}
WorkPtr Backend::gather_list(std::vector<Tensor>&, const Tensor&, const GatherOptions&, const OpContext&) {
  unsupported(OpType::kGather);
}
WorkPtr Backend::scatter_list(Tensor&, const std::vector<Tensor>&, const ScatterOptions&, const OpContext&) {
  unsupported(OpType::kScatter);
}
WorkPtr Backend::reduce_scatter_list(Tensor&, const std::vector<Tensor>&, const ReduceScatterOptions&,
                                     const OpContext&) {
  unsupported(OpType::kReduceScatter);
}
WorkPtr Backend::all_to_all_list(std::vector<Tensor>&, const std::vector<Tensor>&, const AllToAllOptions&,
                                 const OpContext&) {
  unsupported(OpType::kAllToAll);
}

}  // namespace distcomm
