#include "api/diagnostics/p2p_verdict.h"

#include "api/errors.h"

namespace distcomm {
namespace {

bool in_range(const std::vector<std::optional<ProgressReport>>& by_rank, int r) {
  return r >= 0 && r < static_cast<int>(by_rank.size());
}

// Whether verdict v (a size mismatch of this rank's op) rests on ordinals that cannot be
// compared. Judged on the reports as they came (not as trimmed here): an op of this rank
// left out below still says how the pair numbers its transfers.
bool rests_on_uncomparable(const std::vector<std::optional<ProgressReport>>& by_rank, int mine, const OpFingerprint& f) {
  if (f.root >= 0) {
    // A send or recv with a known peer: paired with the peer's op of the same (tag, ordinal),
    // or (a send) with the peer's recv from any rank, judged by whether one of its recvs from
    // this rank already pairs with it by ordinal.
    return f.op == OpType::kSend ? !ordinals_comparable(by_rank, mine, f.root, f.tag)
                                 : !ordinals_comparable(by_rank, f.root, mine, f.tag);
  }
  // A recv from any rank: the sends to this rank it would take are those that none of this
  // rank's recvs from their sender pairs with by ordinal, for every sender.
  for (int r = 0; r < static_cast<int>(by_rank.size()); ++r) {
    if (r != mine && !ordinals_comparable(by_rank, r, mine, f.tag)) return true;
  }
  return false;
}

}  // namespace

bool ordinals_comparable(const std::vector<std::optional<ProgressReport>>& by_rank, int sender, int receiver, int tag) {
  if (!in_range(by_rank, sender) || !in_range(by_rank, receiver)) return true;
  std::optional<uint64_t> epoch;
  // Sends and everything else (recvs) apart, as compare_reports tells them.
  auto same = [&](const ProgressReport* report, bool sends, int peer) {
    if (!report) return true;
    for (const PendingOp& p : report->pending) {
      const OpFingerprint& g = p.fingerprint;
      if (!g.p2p || (g.op == OpType::kSend) != sends || g.root != peer || g.tag != tag || g.ordinal < 0) continue;
      if (!epoch) epoch = p.ordinal_epoch;
      if (*epoch != p.ordinal_epoch) return false;
    }
    return true;
  };
  const ProgressReport* s = by_rank[sender] ? &*by_rank[sender] : nullptr;
  const ProgressReport* d = by_rank[receiver] ? &*by_rank[receiver] : nullptr;
  return same(s, true, receiver) && same(d, false, sender);
}

Verdict comparable_verdict(const std::vector<std::optional<ProgressReport>>& by_rank, int mine,
                           int64_t min_waiting_ms) {
  Verdict v = compare_reports(by_rank, mine, min_waiting_ms);
  if (v.kind != Verdict::Kind::kSizeMismatch || !v.op || !in_range(by_rank, mine) || !by_rank[mine] ||
      !rests_on_uncomparable(by_rank, mine, *v.op)) {
    return v;  // the common case: no copy of the reports
  }
  std::vector<std::optional<ProgressReport>> trimmed = by_rank;
  std::vector<PendingOp>& pending = trimmed[static_cast<size_t>(mine)]->pending;
  // Each round leaves out one op of this rank's (at most kMaxReported of them in a report).
  while (v.kind == Verdict::Kind::kSizeMismatch && v.op && rests_on_uncomparable(by_rank, mine, *v.op)) {
    const OpFingerprint dropped = *v.op;
    bool removed = false;
    for (auto it = pending.begin(); it != pending.end(); ++it) {
      if (it->fingerprint.p2p && it->fingerprint.seq == dropped.seq) {
        pending.erase(it);
        removed = true;
        break;
      }
    }
    if (!removed) return Verdict();  // not of this report: nothing certain
    v = compare_reports(trimmed, mine, min_waiting_ms);
  }
  return v;
}

Verdict explanation_verdict(const std::vector<std::optional<ProgressReport>>& by_rank, int mine) {
  if (!in_range(by_rank, mine) || !by_rank[mine]) return Verdict();
  const int64_t asked_now = by_rank[mine]->request;
  for (const auto& r : by_rank) {
    if (r && !r->left && r->request < asked_now) return Verdict();  // an older answer: words only
  }
  return comparable_verdict(by_rank, mine, 0);
}

std::exception_ptr verdict_error(const Verdict& v) {
  if (v.kind == Verdict::Kind::kDesync) return std::make_exception_ptr(Desync(v.message));
  if (v.kind == Verdict::Kind::kSizeMismatch) return std::make_exception_ptr(InvalidArgument(v.message));
  return nullptr;
}

}  // namespace distcomm
