#include "api/ops/op_numbering.h"

#include <charconv>
#include <cstring>

#include "api/timeouts.h"

namespace distcomm {

OpNumbering::OpNumbering(std::string where_prefix, std::chrono::milliseconds group_timeout)
    : where_prefix_(std::move(where_prefix)), group_timeout_(group_timeout) {}

OpContext OpNumbering::next(const OpSpec& spec, uint64_t* ordinal_epoch) {
  OpContext ctx;
  next_into(spec, ctx, ordinal_epoch);
  return ctx;
}

NumberedOp::NumberedOp(OpNumbering& numbering, const OpSpec& spec, uint64_t* ordinal_epoch)
    : numbering_(numbering), lent_(!numbering.buffer_lent_.exchange(true, std::memory_order_acquire)) {
  if (lent_) ctx_.description = std::move(numbering_.buffer_);
  try {
    numbering_.next_into(spec, ctx_, ordinal_epoch);
  } catch (...) {
    give_back();  // the destructor does not run for a constructor that throws
    throw;
  }
}

NumberedOp::~NumberedOp() { give_back(); }

void NumberedOp::give_back() {
  if (!lent_) return;
  lent_ = false;
  numbering_.buffer_ = std::move(ctx_.description);
  numbering_.buffer_lent_.store(false, std::memory_order_release);
}

void OpNumbering::next_into(const OpSpec& spec, OpContext& ctx, uint64_t* ordinal_epoch) {
  if (ordinal_epoch) *ordinal_epoch = 0;
  const bool p2p = spec.kind == OpKind::kPointToPoint;
  std::atomic<uint64_t>& counter = p2p ? p2p_seq_ : spec.kind == OpKind::kInternal ? internal_seq_ : seq_;
  ctx.seq = counter++;
  if (spec.kind != OpKind::kInternal) issued_[static_cast<size_t>(spec.type)].fetch_add(1, std::memory_order_relaxed);
  ctx.timeout = is_use_default(spec.timeout) ? group_timeout_ : spec.timeout;
  describe(spec, p2p, ctx.seq, ctx.description);
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
  if (!spec.send_counts.empty()) f.send_counts = spec.send_counts;  // all_to_all's (f's are empty)
  if (!spec.recv_counts.empty()) f.recv_counts = spec.recv_counts;
  if (p2p && !spec.batch) {
    f.tag = spec.tag;
    // A recv from any rank pairs with whichever send arrives first: its ordinal is taken
    // when it has ended and its source is known (DetailChecks).
    f.ordinal = spec.root < 0 ? -1 : next_ordinal(spec.type == OpType::kSend, spec.root, spec.tag, ordinal_epoch);
  }
}

void OpNumbering::describe(const OpSpec& spec, bool p2p, uint64_t seq, std::string& out) {
  const Tensor* t = spec.tensor;
  auto same_as_last = [&] {
    return last_.valid && last_.type == spec.type && last_.p2p == p2p && last_.has_tensor == (t != nullptr) &&
           (!t || (last_.dtype == t->dtype() && last_.device == t->device() && last_.shape == t->shape())) &&
           last_.suffix == spec.description_suffix;
  };
  auto fill = [&](LastDescription& d) {
    d.type = spec.type;
    d.p2p = p2p;
    d.has_tensor = t != nullptr;
    if (t) {
      d.dtype = t->dtype();
      d.device = t->device();
      d.shape = t->shape();
    }
    d.suffix = spec.description_suffix;
    d.head = where_prefix_;
    d.head += op_type_name(spec.type);
    d.head += p2p ? " p2p#" : " #";
    d.tail.clear();
    if (t) {
      d.tail += " (";
      d.tail += t->describe();
      d.tail += ')';
    }
    d.tail += spec.description_suffix;
    d.valid = true;
  };
  auto join = [seq, &out](const LastDescription& d) {
    char digits[24];
    const auto end = std::to_chars(digits, digits + sizeof(digits), seq).ptr;
    const size_t n = static_cast<size_t>(end - digits);
    // Sized once and copied into (the lent buffer's capacity fits it after the first op).
    out.resize(d.head.size() + n + d.tail.size());
    char* p = out.data();
    std::memcpy(p, d.head.data(), d.head.size());
    std::memcpy(p + d.head.size(), digits, n);
    std::memcpy(p + d.head.size() + n, d.tail.data(), d.tail.size());
  };
  if (last_taken_.exchange(true, std::memory_order_acquire)) {
    LastDescription fresh;
    fill(fresh);
    join(fresh);
    return;
  }
  // Given back however this ends (fill may throw bad_alloc).
  struct GiveBack {
    std::atomic<bool>& taken;
    ~GiveBack() { taken.store(false, std::memory_order_release); }
  } give_back{last_taken_};
  if (!same_as_last()) fill(last_);
  join(last_);
}

namespace {

// The pair's drop history with one more drop (tag, its count then): splitmix64's finalizer
// over the running value, never 0 (0 means "nothing dropped yet").
uint64_t with_drop(uint64_t drops, int tag, int64_t count) {
  uint64_t x = drops ^ (static_cast<uint64_t>(static_cast<uint32_t>(tag)) << 32) ^ 0x9e3779b97f4a7c15ULL;
  x += static_cast<uint64_t>(count) * 0xd6e8feb86659fd93ULL;
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x ? x : 1;
}

}  // namespace

int64_t OpNumbering::next_ordinal(bool is_send, int peer, int tag, uint64_t* epoch) {
  std::lock_guard<std::mutex> lock(ordinals_mu_);
  PeerTags& tags = transfers_[static_cast<int64_t>(peer) * 2 + (is_send ? 1 : 0)];
  if (keep_every_ordinal_) {  // no order: nothing is dropped
    PeerTags::Count& c = tags.counts[tag];
    if (epoch) *epoch = c.epoch;
    return c.next++;
  }
  auto [it, added] = tags.counts.try_emplace(tag);
  if (added) {
    // The count begins now, after the drops so far: a side whose count began after other
    // drops may number this tag's transfers otherwise (op_numbering.h).
    it->second.epoch = tags.drops;
    tags.order.push_front(tag);
    it->second.in_order = tags.order.begin();
    // The bound depends only on this (direction, peer)'s own sequence of tags, so that its
    // peer, seeing the same sequence, drops the same tags (op_numbering.h).
    if (tags.counts.size() > kTagsPerPeer) {
      const auto dropped = tags.counts.find(tags.order.back());
      tags.drops = with_drop(tags.drops, dropped->first, dropped->second.next);
      tags.counts.erase(dropped);
      tags.order.pop_back();
    }
  } else if (it->second.in_order != tags.order.begin()) {
    tags.order.splice(tags.order.begin(), tags.order, it->second.in_order);
  }
  if (epoch) *epoch = it->second.epoch;
  return it->second.next++;
}

void OpNumbering::keep_every_ordinal() {
  std::lock_guard<std::mutex> lock(ordinals_mu_);
  keep_every_ordinal_ = true;
}

size_t OpNumbering::ordinal_keys() const {
  std::lock_guard<std::mutex> lock(ordinals_mu_);
  size_t n = 0;
  for (const auto& [key, tags] : transfers_) n += tags.counts.size();
  return n;
}

}  // namespace distcomm
