#include "api/ops/detail_checks.h"

#include <optional>
#include <vector>

#include "api/diagnostics/desync_summary.h"
#include "api/diagnostics/progress_report.h"
#include "api/errors.h"

namespace distcomm {

DetailChecks::DetailChecks(int rank, StorePtr store, std::string store_prefix, HostExchange& exchange,
                           OpNumbering& numbering)
    : rank_(rank),
      store_(std::move(store)),
      store_prefix_(std::move(store_prefix)),
      exchange_(exchange),
      numbering_(numbering) {
  // A send's key and its recv's must name the same transfer, whatever order the peer posts
  // its recvs of other tags in: the numbering's bound on tags could break that (op_numbering.h).
  numbering_.keep_every_ordinal();
}

WorkPtr DetailChecks::around(const OpSpec& spec, const OpContext& ctx, const std::function<WorkPtr()>& issue) {
  if (spec.batch) return store_ ? checked_batch(*spec.batch, spec, ctx, issue) : issue();
  const OpFingerprint& mine = ctx.fingerprint;
  if (!mine.p2p) {
    compare_fingerprints(ctx);
    return issue();
  }
  if (!store_) return issue();
  if (mine.op == OpType::kSend) {
    post_for_recv(mine);  // for its recv to compare
    return issue();
  }
  return checked_recv(issue(), ctx);
}

void DetailChecks::compare_fingerprints(const OpContext& ctx) {
  const OpFingerprint& mine = ctx.fingerprint;
  const std::vector<std::string> texts = exchange_.all_gather(mine.encode(), "DISTCOMM_DEBUG=DETAIL's op check");
  std::vector<std::optional<OpFingerprint>> by_rank;
  std::vector<OpFingerprint> all_to_alls;
  bool differs = false, every_one_all_to_all = true;
  for (const std::string& text : texts) {
    by_rank.push_back(OpFingerprint::decode(text));
    differs = differs || !by_rank.back() || by_rank.back()->agreement_hash() != mine.agreement_hash();
    every_one_all_to_all = every_one_all_to_all && by_rank.back() && by_rank.back()->op == OpType::kAllToAll;
    all_to_alls.push_back(by_rank.back().value_or(OpFingerprint()));
  }
  const std::string pairs = !differs && every_one_all_to_all ? all_to_all_mismatches(all_to_alls) : "";
  if (!differs && pairs.empty()) return;
  const std::string prefix = ctx.description + ": DISTCOMM_DEBUG=DETAIL: ";
  // Every rank throws, and every rank's error is printed: in a large group only one rank's
  // holds the table (desync_summary.h), the others name the culprit and that rank in one line.
  std::vector<std::string> ops;
  for (const auto& f : by_rank) ops.push_back(f ? f->describe() : "(unreadable)");
  const DesyncSummary summary = summarize_desync(ops);
  if (table_on_every_rank(ops.size()) || rank_ == summary.table_rank) {
    throw Desync(prefix + desync_message(mine.seq, rank_table(ops), pairs, /*found_by_detail=*/true));
  }
  throw Desync(prefix + (differs ? desync_line(mine.seq, summary) : split_pairs_line(mine.seq, pairs, summary)));
}

std::string DetailChecks::p2p_key(int src, int dst, const OpFingerprint& f) const {
  return store_prefix_ + "detail/p2p/" + std::to_string(src) + "/" + std::to_string(dst) + "/" +
         std::to_string(f.tag) + "/" + std::to_string(f.ordinal);
}

void DetailChecks::post_for_recv(const OpFingerprint& send) {
  // Posted before the send is handed to the backend: the recv finds it once it has the
  // message.
  store_->set(p2p_key(rank_, send.root, send), to_bytes(send.encode()));
}

void DetailChecks::compare_with_sent(const OpFingerprint& recv, const std::string& description,
                                     std::chrono::milliseconds timeout) {
  const std::string key = p2p_key(recv.root, rank_, recv);
  // The sender posted before it sent, so the key is there once the message is.
  store_->wait({key}, timeout);
  const std::optional<OpFingerprint> sent = OpFingerprint::decode(to_string(store_->get(key)));
  store_->delete_key(key);
  if (!sent || sent->p2p_hash() != recv.p2p_hash()) {
    throw InvalidArgument(description + ": DISTCOMM_DEBUG=DETAIL: this rank's " + recv.describe() + " received rank " +
                          std::to_string(recv.root) + "'s " + (sent ? sent->describe() : std::string("(unreadable)")) +
                          "; a send and its recv must have the same count and dtype");
  }
}

WorkPtr DetailChecks::checked_recv(const WorkPtr& work, const OpContext& ctx) {
  // then() runs this while `work` finishes, so the raw pointer is valid; so is this object,
  // which the group owns, and whose backend ends its ops before the group goes away.
  Work* received = work.get();
  return then(work, [this, mine = ctx.fingerprint, received, description = ctx.description,
                     timeout = ctx.timeout]() mutable {
    if (mine.root < 0) {
      // From any rank: now that the source is known, this was its next transfer to here.
      mine.root = received->source_rank();
      if (mine.root < 0) return;  // the backend did not say (ABI before source ranks): nothing to compare
      mine.ordinal = numbering_.next_ordinal(false, mine.root, mine.tag);
    }
    compare_with_sent(mine, description, timeout);
  });
}

WorkPtr DetailChecks::checked_batch(const std::vector<P2POp>& ops, const OpSpec& spec, const OpContext& ctx,
                                    const std::function<WorkPtr()>& issue) {
  // Each part numbered as a single send or recv would be, the sends posted before the batch
  // goes to the backend, the recvs compared once the batch has ended.
  std::vector<OpFingerprint> recvs;
  for (const P2POp& op : ops) {
    const bool is_send = op.kind == P2POp::Kind::kSend;
    OpFingerprint f;
    f.op = is_send ? OpType::kSend : OpType::kRecv;
    f.seq = ctx.seq;
    f.p2p = true;
    f.set_tensor(op.tensor);
    f.root = op.peer;
    f.tag = spec.tag;
    f.ordinal = numbering_.next_ordinal(is_send, op.peer, spec.tag);
    if (is_send) {
      post_for_recv(f);
    } else {
      recvs.push_back(f);
    }
  }
  WorkPtr work = issue();
  if (recvs.empty()) return work;
  return then(work, [this, recvs, description = ctx.description, timeout = ctx.timeout] {
    for (const OpFingerprint& r : recvs) compare_with_sent(r, description, timeout);
  });
}

}  // namespace distcomm
