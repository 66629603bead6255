// ProcessGroup::batch_isend_irecv: checked here, then one call to a backend that batches
// natively (nccl), or the ops one by one for the others, joined into one Work.
#include <algorithm>
#include <memory>
#include <mutex>

#include "api/errors.h"
#include "api/process_group.h"

namespace distcomm {
namespace {

// A Work that ends when every part has ended, with the first error in the parts' order.
WorkPtr all_of(const std::vector<WorkPtr>& parts, OpType op, uint64_t seq, const std::string& description) {
  auto outer = std::make_shared<Work>(op, seq, description);
  struct State {
    std::mutex mu;
    size_t left;
    std::vector<std::exception_ptr> errors;
  };
  auto state = std::make_shared<State>();
  state->left = parts.size();
  state->errors.resize(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    parts[i]->on_finish([outer, state, i](std::exception_ptr error) {
      std::exception_ptr first;
      {
        std::lock_guard<std::mutex> lock(state->mu);
        state->errors[i] = error;
        if (--state->left > 0) return;
        for (const auto& e : state->errors) {
          if (e) {
            first = e;
            break;
          }
        }
      }
      outer->finish(first);
    });
  }
  return outer;
}

}  // namespace

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
    return recorded(ctx, [&] { return b.batch_p2p(ops, opts, ctx); });
  }
  // One by one, in order: backends whose sends and receives progress on their own.
  std::vector<WorkPtr> parts;
  for (auto& op : ops) {
    parts.push_back(op.kind == P2POp::Kind::kSend ? send(op.tensor, op.peer, opts) : recv(op.tensor, op.peer, opts));
  }
  return all_of(parts, kOp, parts.front()->seq(), where(kOp) + " of " + std::to_string(ops.size()) + " ops");
}

}  // namespace distcomm
