// ProcessGroup: DISTCOMM_DEBUG's checks and logs (api/debug_level.h).
#include <optional>
#include <string>
#include <vector>

#include "api/errors.h"
#include "api/logging.h"
#include "api/process_group.h"
#include "api/diagnostics/progress_report.h"

namespace distcomm {

DebugLevel parse_debug_level(const std::string& text) {
  std::string upper;
  for (char c : text) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (upper.empty() || upper == "OFF") return DebugLevel::kOff;
  if (upper == "INFO") return DebugLevel::kInfo;
  if (upper == "DETAIL") return DebugLevel::kDetail;
  throw InvalidArgument("debug level '" + text + "' (DISTCOMM_DEBUG or InitOptions::debug) must be OFF, INFO or DETAIL");
}

const char* debug_level_name(DebugLevel level) {
  switch (level) {
    case DebugLevel::kOff: return "OFF";
    case DebugLevel::kInfo: return "INFO";
    case DebugLevel::kDetail: return "DETAIL";
  }
  return "?";
}

std::string ProcessGroup::detail_p2p_key(int src, int dst, const OpFingerprint& f) const {
  return store_prefix_ + "detail/p2p/" + std::to_string(src) + "/" + std::to_string(dst) + "/" +
         std::to_string(f.tag) + "/" + std::to_string(f.ordinal);
}

bool ProcessGroup::detail_p2p_on() const {
  return options_.debug == DebugLevel::kDetail && size() > 1 && options_.store;
}

void ProcessGroup::post_for_recv(const OpFingerprint& send) {
  // Posted before the send is handed to the backend: nothing waits here (a send may be
  // issued long before its recv), and the recv finds it once it has the message.
  options_.store->set(detail_p2p_key(rank(), send.root, send), to_bytes(send.encode()));
}

void ProcessGroup::compare_with_sent(const OpFingerprint& recv, const std::string& description,
                                     std::chrono::milliseconds timeout) {
  const std::string key = detail_p2p_key(recv.root, rank(), recv);
  // The sender posted before it sent, so the key is there once the message is.
  options_.store->wait({key}, timeout);
  const std::optional<OpFingerprint> sent = OpFingerprint::decode(to_string(options_.store->get(key)));
  options_.store->delete_key(key);
  if (!sent || sent->p2p_hash() != recv.p2p_hash()) {
    throw InvalidArgument(description + ": DISTCOMM_DEBUG=DETAIL: this rank's " + recv.describe() + " received rank " +
                          std::to_string(recv.root) + "'s " + (sent ? sent->describe() : std::string("(unreadable)")) +
                          "; a send and its recv must have the same count and dtype");
  }
}

const OpContext& ProcessGroup::check_detail(const OpContext& ctx) {
  if (options_.debug != DebugLevel::kDetail || size() == 1) return ctx;
  const OpFingerprint& mine = ctx.fingerprint;
  if (mine.p2p) {
    if (mine.op == OpType::kSend && options_.store) post_for_recv(mine);  // for its recv to compare
    return ctx;
  }
  const std::vector<std::string> texts = exchange().all_gather(mine.encode());
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
  if (differs || !pairs.empty()) {
    // Every rank saw the same fingerprints, so every rank throws here, and none has issued
    // the op: the group stays usable.
    throw Desync(ctx.description + ": DISTCOMM_DEBUG=DETAIL: " +
                 desync_message(mine.seq, fingerprint_table(by_rank, "(unreadable)"), pairs));
  }
  return ctx;
}

WorkPtr ProcessGroup::checked_recv(const WorkPtr& work, const OpContext& ctx) {
  if (!detail_p2p_on()) return work;
  // then() runs this while `work` finishes, so the raw pointer is valid; so is the group,
  // whose backend ends its ops before the group goes away.
  Work* received = work.get();
  return then(work, [this, mine = ctx.fingerprint, received, description = ctx.description,
                     timeout = ctx.timeout]() mutable {
    if (mine.root < 0) {
      // From any rank: now that the source is known, this was its next transfer to here.
      mine.root = received->source_rank();
      if (mine.root < 0) return;  // the backend did not say (ABI before source ranks): nothing to compare
      mine.ordinal = next_ordinal(false, mine.root, mine.tag);
    }
    compare_with_sent(mine, description, timeout);
  });
}

WorkPtr ProcessGroup::checked_batch(const std::vector<P2POp>& ops, const P2POptions& opts, const OpContext& ctx,
                                    const std::function<WorkPtr()>& call) {
  if (!detail_p2p_on()) return call();
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
    f.tag = opts.tag;
    f.ordinal = next_ordinal(is_send, op.peer, opts.tag);
    if (is_send) {
      post_for_recv(f);
    } else {
      recvs.push_back(f);
    }
  }
  WorkPtr work = call();
  if (recvs.empty()) return work;
  return then(work, [this, recvs, description = ctx.description, timeout = ctx.timeout] {
    for (const OpFingerprint& r : recvs) compare_with_sent(r, description, timeout);
  });
}

void ProcessGroup::log_created() {
  if (options_.debug == DebugLevel::kOff) return;
  std::string ranks;
  for (int r : options_.global_ranks) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  ordered_print(*this,
                "group '" + name() + "' created: rank " + std::to_string(rank()) + " of " + std::to_string(size()) +
                    " (global ranks [" + ranks + "]), backend " + backend_name() + ", timeout " +
                    std::to_string(timeout().count()) + " ms, DISTCOMM_DEBUG=" + debug_level_name(options_.debug),
                /*prefix=*/true, /*to_stderr=*/true);
}

namespace {

bool is_point_to_point(OpType op) {
  return op == OpType::kSend || op == OpType::kRecv || op == OpType::kRecvAnySource || op == OpType::kBatchP2P;
}

}  // namespace

void ProcessGroup::log_destroyed() const {
  if (options_.debug == DebugLevel::kOff) return;
  // Each rank on its own, not in rank order: ordering needs the others, and a destructor
  // must not wait for a rank that may be gone.
  uint64_t totals[2] = {0, 0};  // collectives, point to point
  std::string lists[2];
  for (size_t i = 0; i < issued_.size(); ++i) {
    const uint64_t n = issued_[i].load(std::memory_order_relaxed);
    if (n == 0) continue;
    const auto op = static_cast<OpType>(i);
    const int which = is_point_to_point(op) ? 1 : 0;
    totals[which] += n;
    lists[which] += (lists[which].empty() ? "" : ", ") + std::to_string(n) + " " + op_type_name(op);
  }
  auto part = [&](int which, const char* one, const char* many) {
    return std::to_string(totals[which]) + " " + (totals[which] == 1 ? one : many) +
           (lists[which].empty() ? "" : " (" + lists[which] + ")");
  };
  log_line_as(rank(), size(),
              "group '" + name() + "' destroyed: this rank issued " + part(0, "collective", "collectives") + " and " +
                  part(1, "point-to-point op", "point-to-point ops"));
}

}  // namespace distcomm
