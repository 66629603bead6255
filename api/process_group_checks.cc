// ProcessGroup: argument checks, sequence numbers and routing, shared by every op.
#include <algorithm>

#include "api/errors.h"
#include "api/process_group.h"

namespace distcomm {

std::string ProcessGroup::where(OpType op) const { return where_prefix_ + op_type_name(op); }

void ProcessGroup::check_tensor(OpType op, const Tensor& t, const char* arg) const {
  if (!t.defined()) throw InvalidArgument(where(op) + ": argument '" + arg + "' is an undefined tensor");
  if (t.numel() > 0 && t.data() == nullptr) {
    throw InvalidArgument(where(op) + ": argument '" + arg + "' has no memory");
  }
}

void ProcessGroup::check_same(OpType op, const Tensor& a, const char* a_name, const Tensor& b,
                              const char* b_name) const {
  if (a.dtype() != b.dtype() || a.device() != b.device() || a.numel() != b.numel()) {
    throw InvalidArgument(where(op) + ": '" + a_name + "' is " + a.describe() + " but '" + b_name + "' is " +
                          b.describe() + "; they must match in dtype, device and number of elements");
  }
}

void ProcessGroup::check_alike(OpType op, const Tensor& a, const char* a_name, const Tensor& b,
                               const char* b_name) const {
  if (a.dtype() != b.dtype() || a.device() != b.device()) {
    throw InvalidArgument(where(op) + ": " + a_name + " is " + a.describe() + ", " + b_name + " is " + b.describe());
  }
}

void ProcessGroup::check_whole_and_part(OpType op, const Tensor& whole, const char* whole_name, const Tensor& part,
                                        const char* part_name) const {
  check_tensor(op, part, part_name);
  check_tensor(op, whole, whole_name);
  check_alike(op, whole, whole_name, part, part_name);
  check_count(op, whole, part.numel() * size(), whole_name, std::string("size() * ") + part_name + ".numel()");
}

bool ProcessGroup::check_list(OpType op, const std::vector<Tensor>& list, const char* arg, const Tensor& like,
                              const char* like_name, int root) const {
  if (root >= 0 && rank() != root) {
    if (list.empty()) return false;
    throw InvalidArgument(where(op) + ": '" + arg + "' must be empty on non-root ranks (root is " +
                          std::to_string(root) + ")");
  }
  if (static_cast<int>(list.size()) != size()) {
    throw InvalidArgument(where(op) + ": '" + arg + "' has " + std::to_string(list.size()) +
                          " tensors, expected one per rank (" + std::to_string(size()) + ")" +
                          (root >= 0 ? " on the root" : ""));
  }
  const std::string element = std::string(arg) + "[i]";
  for (const Tensor& t : list) check_same(op, t, element.c_str(), like, like_name);
  return true;
}

void ProcessGroup::check_root(OpType op, int root) const {
  if (root < 0 || root >= size()) {
    throw InvalidArgument(where(op) + ": root " + std::to_string(root) + " is outside the group's ranks [0, " +
                          std::to_string(size()) + ")");
  }
}

void ProcessGroup::check_peer(OpType op, int peer, const char* arg) const {
  if (peer < 0 || peer >= size()) {
    throw InvalidArgument(where(op) + ": " + arg + " " + std::to_string(peer) + " is outside [0, " +
                          std::to_string(size()) + ")");
  }
  if (peer == rank()) throw InvalidArgument(where(op) + ": " + arg + " is this rank itself (" + std::to_string(peer) + ")");
}

void ProcessGroup::check_p2p(OpType op, const Tensor& t, const char* peer_arg, int peer, int tag) const {
  check_tensor(op, t, "tensor");
  if (peer_arg) {
    check_peer(op, peer, peer_arg);
  } else if (size() < 2) {
    throw InvalidArgument(where(op) + ": a group of one has no other rank to receive from");
  }
  if (tag < 0) throw InvalidArgument(where(op) + ": tag must be >= 0, got " + std::to_string(tag));
}

void ProcessGroup::check_reduce(OpType op, ReduceOp rop, const Tensor& t) const {
  std::string why;
  if (!reduce_supported(rop, t.dtype(), &why)) throw InvalidArgument(where(op) + ": " + why);
}

void ProcessGroup::require_host(OpType op, const Tensor& t, const std::string& what) const {
  if (!t.is_cpu()) {
    throw InvalidArgument(where(op) + ": " + what + " packs on the host and is not available for " +
                          t.device().str() + " tensors");
  }
}

void ProcessGroup::check_count(OpType op, const Tensor& t, int64_t expected, const char* arg,
                               const std::string& why) const {
  if (t.numel() != expected) {
    throw InvalidArgument(where(op) + ": '" + arg + "' has " + std::to_string(t.numel()) + " elements, expected " +
                          std::to_string(expected) + " (" + why + ")");
  }
}

OpContext ProcessGroup::next_context(OpType op, const Tensor* t, std::chrono::milliseconds timeout, OpKind kind) {
  if (aborted_) throw PeerFailure(where(op) + ": the group was aborted; create a new group");
  const bool p2p = kind == OpKind::kPointToPoint;
  OpContext ctx;
  std::atomic<uint64_t>& counter = p2p ? p2p_seq_ : kind == OpKind::kInternal ? exchange_seq_ : seq_;
  ctx.seq = counter++;
  if (kind != OpKind::kInternal) issued_[static_cast<size_t>(op)].fetch_add(1, std::memory_order_relaxed);
  ctx.timeout = is_use_default(timeout) ? options_.timeout : timeout;
  // Appended in place: every op pays for this string.
  std::string& d = ctx.description;
  d.reserve(where_prefix_.size() + 64);
  d = where_prefix_;
  d += op_type_name(op);
  d += p2p ? " p2p#" : " #";
  d += std::to_string(ctx.seq);
  if (t) {
    d += " (";
    d += t->describe();
    d += ')';
  }
  OpFingerprint& f = ctx.fingerprint;
  f.op = op;
  f.seq = ctx.seq;
  f.p2p = p2p;
  f.internal = kind == OpKind::kInternal;
  if (t) f.set_tensor(*t);
  return ctx;
}

OpContext ProcessGroup::p2p_context(OpType op, const Tensor& t, int peer, const P2POptions& opts) {
  OpContext ctx = next_context(op, &t, opts.timeout, OpKind::kPointToPoint);
  OpFingerprint& f = ctx.fingerprint;
  f.root = peer;
  f.tag = opts.tag;
  // A recv from any rank pairs with whichever send arrives first: its ordinal is taken
  // when it has ended and its source is known (checked_recv).
  f.ordinal = peer < 0 ? -1 : next_ordinal(op == OpType::kSend, peer, opts.tag);
  return ctx;
}

int64_t ProcessGroup::next_ordinal(bool is_send, int peer, int tag) {
  std::lock_guard<std::mutex> lock(ordinals_mu_);
  return transfers_[std::make_tuple(is_send, peer, tag)]++;
}

void ProcessGroup::with_reduction(OpContext& ctx, ReduceOp op) {
  ctx.fingerprint.has_reduction = true;
  ctx.fingerprint.reduction = op;
}

Backend& ProcessGroup::route(OpType op, DeviceType device) {
  Backend* b = nullptr;
  try {
    b = &backend_for(device);
  } catch (const Error&) {
    std::rethrow_exception(with_context(std::current_exception(), where(op)));
  }
  // The one gate before a backend's op virtual is called: a plugin built before an op was
  // added has no virtual for it, and cannot list it (plugin.h, the ABI rules).
  const auto& ops = supported_ops_[device];
  if (std::find(ops.begin(), ops.end(), op) == ops.end()) {
    throw Unsupported(where(op) + ": backend " + b->name() + " does not support " + op_type_name(op));
  }
  return *b;
}

ProcessGroup::ReductionPlan ProcessGroup::plan_reduction(OpType op, Backend& b, ReduceOp requested,
                                                         const Tensor& t) const {
  ReductionPlan plan;
  plan.run = requested;
  const bool scaled = requested.kind == ReduceOp::AVG || requested.kind == ReduceOp::PREMUL_SUM;
  if (!scaled || b.reduces_natively(requested, t.dtype())) return plan;
  // The host does the scaling, so the tensors must be on the host.
  if (!t.is_cpu()) {
    throw InvalidArgument(where(op) + ": backend " + b.name() + " has no " + requested.name() + " for " +
                          t.describe());
  }
  plan.run = ReduceOp::SUM;
  plan.premultiply_by = requested.kind == ReduceOp::PREMUL_SUM ? requested.factor : 1.0;
  plan.divide_by = requested.kind == ReduceOp::AVG ? size() : 1;
  return plan;
}

Tensor ProcessGroup::premultiplied(const ReductionPlan& plan, const Tensor& input, bool in_place) {
  if (plan.premultiply_by == 1.0) return input;
  Tensor scaled = in_place ? input : input.clone();
  scale_in_place(scaled.data(), static_cast<size_t>(scaled.numel()), scaled.dtype(), plan.premultiply_by);
  return scaled;
}

WorkPtr ProcessGroup::divided_after(const ReductionPlan& plan, const WorkPtr& work, const Tensor& result) {
  if (plan.divide_by == 1) return work;
  return then(work, [out = result, n = plan.divide_by]() mutable {
    divide_in_place(out.data(), static_cast<size_t>(out.numel()), out.dtype(), n);
  });
}

}  // namespace distcomm
