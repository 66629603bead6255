#include "api/ops/op_numbering.h"

#include <charconv>

#include "api/timeouts.h"

namespace distcomm {

OpNumbering::OpNumbering(std::string where_prefix, std::chrono::milliseconds group_timeout)
    : where_prefix_(std::move(where_prefix)), group_timeout_(group_timeout) {}

OpContext OpNumbering::next(const OpSpec& spec, uint64_t* ordinal_epoch) {
  if (ordinal_epoch) *ordinal_epoch = 0;
  const bool p2p = spec.kind == OpKind::kPointToPoint;
  OpContext ctx;
  std::atomic<uint64_t>& counter = p2p ? p2p_seq_ : spec.kind == OpKind::kInternal ? internal_seq_ : seq_;
  ctx.seq = counter++;
  if (spec.kind != OpKind::kInternal) issued_[static_cast<size_t>(spec.type)].fetch_add(1, std::memory_order_relaxed);
  ctx.timeout = is_use_default(spec.timeout) ? group_timeout_ : spec.timeout;
  ctx.description = describe(spec, p2p, ctx.seq);
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
    f.ordinal = spec.root < 0 ? -1 : next_ordinal(spec.type == OpType::kSend, spec.root, spec.tag, ordinal_epoch);
  }
  return ctx;
}

std::string OpNumbering::describe(const OpSpec& spec, bool p2p, uint64_t seq) {
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
  auto join = [seq](const LastDescription& d) {
    char digits[24];
    const auto end = std::to_chars(digits, digits + sizeof(digits), seq).ptr;
    std::string s;
    s.reserve(d.head.size() + static_cast<size_t>(end - digits) + d.tail.size());
    s += d.head;
    s.append(digits, end);
    s += d.tail;
    return s;
  };
  std::unique_lock<std::mutex> lock(last_mu_, std::try_to_lock);
  if (!lock.owns_lock()) {
    LastDescription fresh;
    fill(fresh);
    return join(fresh);
  }
  if (!same_as_last()) fill(last_);
  return join(last_);
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
