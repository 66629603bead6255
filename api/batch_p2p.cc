// ProcessGroup::batch_isend_irecv: checked here, then one call to a backend that batches
// natively (nccl), or the ops one by one for the others, joined into one Work.
#include <algorithm>
#include <memory>
#include <mutex>

#include "api/errors.h"
#include "api/process_group.h"

namespace distcomm {

WorkPtr ProcessGroup::batch_isend_irecv(std::vector<P2POp>& ops, const P2POptions& opts) {
  constexpr OpType kOp = OpType::kBatchP2P;
  if (ops.empty()) throw InvalidArgument(where(kOp) + ": the batch is empty");
  if (opts.tag < 0) throw InvalidArgument(where(kOp) + ": tag must be >= 0, got " + std::to_string(opts.tag));
  for (size_t i = 0; i < ops.size(); ++i) {
    const std::string name = "ops[" + std::to_string(i) + "]";
    if (ops[i].kind != P2POp::Kind::kSend && ops[i].kind != P2POp::Kind::kRecv) {
      throw InvalidArgument(where(kOp) + ": " + name + " is neither a send nor a receive");
    }
    check_tensor(kOp, ops[i].tensor, (name + ".tensor").c_str());
    check_peer(kOp, ops[i].peer, (name + ".peer").c_str());
    if (ops[i].tensor.device().type != ops[0].tensor.device().type) {
      throw InvalidArgument(where(kOp) + ": " + name + " is on " + ops[i].tensor.device().str() + " but ops[0] on " +
                            ops[0].tensor.device().str() + "; one batch goes to one backend");
    }
  }
  Backend& b = backend_for(ops[0].tensor.device().type);
  const auto& native = supported_ops_[ops[0].tensor.device().type];
  if (std::find(native.begin(), native.end(), kOp) != native.end()) {
    OpContext ctx = next_context(kOp, nullptr, opts.timeout, OpKind::kPointToPoint);
    ctx.description += " (" + std::to_string(ops.size()) + " sends and receives)";
    return checked_batch(ops, opts, ctx, [&] { return recorded(ctx, [&] { return b.batch_p2p(ops, opts, ctx); }); });
  }
  // One by one, in order: backends whose sends and receives progress on their own.
  std::vector<WorkPtr> parts;
  for (auto& op : ops) {
    parts.push_back(op.kind == P2POp::Kind::kSend ? send(op.tensor, op.peer, opts) : recv(op.tensor, op.peer, opts));
  }
  return all_of(parts, kOp, parts.front()->seq(), where(kOp) + " of " + std::to_string(ops.size()) + " ops");
}

}  // namespace distcomm
