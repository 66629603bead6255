#include "api/ops/op_numbering.h"

#include "api/timeouts.h"

namespace distcomm {

OpNumbering::OpNumbering(std::string where_prefix, std::chrono::milliseconds group_timeout)
    : where_prefix_(std::move(where_prefix)), group_timeout_(group_timeout) {}

OpContext OpNumbering::next(const OpSpec& spec) {
  const bool p2p = spec.kind == OpKind::kPointToPoint;
  OpContext ctx;
  std::atomic<uint64_t>& counter = p2p ? p2p_seq_ : spec.kind == OpKind::kInternal ? internal_seq_ : seq_;
  ctx.seq = counter++;
  if (spec.kind != OpKind::kInternal) issued_[static_cast<size_t>(spec.type)].fetch_add(1, std::memory_order_relaxed);
  ctx.timeout = is_use_default(spec.timeout) ? group_timeout_ : spec.timeout;
  // Appended in place: every op pays for this string.
  std::string& d = ctx.description;
  d.reserve(where_prefix_.size() + 64);
  d = where_prefix_;
  d += op_type_name(spec.type);
  d += p2p ? " p2p#" : " #";
  d += std::to_string(ctx.seq);
  if (spec.tensor) {
    d += " (";
    d += spec.tensor->describe();
    d += ')';
  }
  d += spec.description_suffix;
  OpFingerprint& f = ctx.fingerprint;
  f.op = spec.type;
  f.seq = ctx.seq;
  f.p2p = p2p;
  f.internal = spec.kind == OpKind::kInternal;
  if (spec.tensor) f.set_tensor(*spec.tensor);
  if (spec.reduction) {
    f.has_reduction = true;
    f.reduction = *spec.reduction;
  }
  f.root = spec.root;
  f.send_counts = spec.send_counts;
  f.recv_counts = spec.recv_counts;
  if (p2p && !spec.batch) {
    f.tag = spec.tag;
    // A recv from any rank pairs with whichever send arrives first: its ordinal is taken
    // when it has ended and its source is known (DetailChecks).
    f.ordinal = spec.root < 0 ? -1 : next_ordinal(spec.type == OpType::kSend, spec.root, spec.tag);
  }
  return ctx;
}

int64_t OpNumbering::next_ordinal(bool is_send, int peer, int tag) {
  std::lock_guard<std::mutex> lock(ordinals_mu_);
  return transfers_[std::make_tuple(is_send, peer, tag)]++;
}

}  // namespace distcomm
