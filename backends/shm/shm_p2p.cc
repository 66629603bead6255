#include "backends/shm/shm_p2p.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cstring>

#include "api/errors.h"
#include "api/diagnostics/op_fingerprint.h"
#include "api/diagnostics/refused_transfers.h"
#include "api/diagnostics/work_wait_note.h"
#include "backends/shm/shm_failure.h"

namespace distcomm {
namespace shm {
namespace {

// Null when a message of `bytes` in `dtype` fits receive r; else the InvalidArgument that
// names both sides, as the other backends word it.
std::exception_ptr mismatch_of(const P2PRequest& r, int src, int tag, uint64_t bytes, DType dtype) {
  if (bytes == r.bytes && dtype == r.dtype) return nullptr;
  auto count = [](uint64_t b, DType t) { return static_cast<int64_t>(b / element_size(t)); };
  return std::make_exception_ptr(InvalidArgument(
      "rank " + std::to_string(src) + " sends " + elements_text(count(bytes, dtype), dtype) + " with tag " +
      std::to_string(tag) + ", but this receive holds " + elements_text(count(r.bytes, r.dtype), r.dtype) +
      "; a send and its recv must have the same count and dtype. The message was discarded and the tensor left "
      "untouched; the sender cannot tell (its send completed once the message was in the ring), and the group "
      "stays usable"));
}

DType dtype_of(const ChunkHeader& h) { return static_cast<DType>(h.dtype); }

// PointToPoint::scan_steps(): relaxed, a statistic.
std::atomic<uint64_t> g_scan_steps{0};
void count_steps(uint64_t n) { g_scan_steps.fetch_add(n, std::memory_order_relaxed); }

// A receive that has waited this long for a message while this rank holds others gets them
// named in its wait note (note_held_messages), rewritten at most this often: most receives
// end sooner, and the stall watch's first "has waited" line comes much later (60 s).
constexpr std::chrono::seconds kHeldNoteAfter{1};

// An unexpected message's buffer is reserved up to this at its first chunk.
constexpr uint64_t kUnexpectedReserveBytes = uint64_t{64} << 20;

// "send to rank 2 (tag 0, 400 bytes)"
std::string describe(const P2PRequest& r) {
  const std::string peer = r.peer < 0 ? std::string("any rank") : "rank " + std::to_string(r.peer);
  return std::string(r.is_send ? "send to " : "receive from ") + peer + " (tag " + std::to_string(r.tag) + ", " +
         std::to_string(r.bytes) + " bytes)";
}

}  // namespace

PointToPoint::PointToPoint(const MappedGroup& group)
    : group_(group),
      sends_(static_cast<size_t>(group.size())),
      recvs_by_tag_(static_cast<size_t>(group.size())),
      recvs_from_(static_cast<size_t>(group.size()), 0),
      alive_(static_cast<size_t>(group.size()), -1),
      incoming_(static_cast<size_t>(group.size())),
      unexpected_(static_cast<size_t>(group.size())),
      unexpected_by_tag_(static_cast<size_t>(group.size())),
      head_(static_cast<size_t>(group.size()), 0),
      tail_seen_(static_cast<size_t>(group.size()), 0),
      tail_(static_cast<size_t>(group.size()), 0),
      head_seen_(static_cast<size_t>(group.size()), 0),
      sent_(static_cast<size_t>(group.size()), 0),
      sent_texts_(static_cast<size_t>(group.size())),
      taken_(static_cast<size_t>(group.size()), 0) {
  Doorbell& bell = group_.self().control().doorbell;
  blocker_.word = &bell.ring;
  blocker_.sleepers = &bell.sleepers;
}

bool PointToPoint::idle() const {
  // Every pending request has its deadline in deadlines_ (add() puts it there, finish() and
  // fail_all() take it out), so none there means none anywhere: the common case (a group
  // running collectives only) costs one comparison a poll, not a walk over every peer.
  if (deadlines_.empty()) {
    assert(holds_no_request());
    return true;
  }
  return holds_no_request();
}

bool PointToPoint::holds_no_request() const {
  if (!recvs_.empty()) return false;
  for (const auto& q : sends_) {
    if (!q.empty()) return false;
  }
  // Only the message still arriving from a source can be claimed (take_unexpected), and
  // that one is incoming_'s: no walk over the kept messages, this runs every poll.
  for (const auto& in : incoming_) {
    if (in.recv || (in.unexpected && in.unexpected->claimed)) return false;
  }
  return true;
}

uint64_t PointToPoint::scan_steps() { return g_scan_steps.load(std::memory_order_relaxed); }

void PointToPoint::finish(const P2PRequest& r, std::exception_ptr error, int source, std::vector<Completion>& done) {
  auto it = deadlines_.find(r.deadline);
  if (it != deadlines_.end()) deadlines_.erase(it);
  done.push_back({r.work, std::move(error), source});
}

void PointToPoint::post_recv(P2PRequest r) {
  r.posted = posted_++;
  if (r.peer >= 0) {
    recvs_by_tag_[static_cast<size_t>(r.peer)][r.tag].push_back(r.posted);
    ++recvs_from_[static_cast<size_t>(r.peer)];
  } else {
    any_source_by_tag_[r.tag].push_back(r.posted);
    ++any_source_recvs_;
  }
  const uint64_t key = r.posted;
  recvs_.emplace(key, std::move(r));
}

std::optional<P2PRequest> PointToPoint::take_recv(int src, int tag) {
  // The oldest receive naming src with this tag and the oldest any-source one with it: the
  // earlier posted of the two is the one an MPI receive queue walked from its start finds.
  ByTag& mine = recvs_by_tag_[static_cast<size_t>(src)];
  auto from_src = mine.find(tag);
  auto from_any = any_source_by_tag_.find(tag);
  count_steps(2);
  const bool have_src = from_src != mine.end();
  const bool have_any = from_any != any_source_by_tag_.end();
  if (!have_src && !have_any) return std::nullopt;
  const bool use_src = have_src && (!have_any || from_src->second.front() < from_any->second.front());
  ByTag& index = use_src ? mine : any_source_by_tag_;
  auto entry = use_src ? from_src : from_any;
  const uint64_t key = entry->second.front();
  entry->second.pop_front();
  if (entry->second.empty()) index.erase(entry);  // the tags in use, not every tag ever seen
  if (use_src) {
    --recvs_from_[static_cast<size_t>(src)];
  } else {
    --any_source_recvs_;
  }
  auto node = recvs_.extract(key);
  return std::move(node.mapped());
}

void PointToPoint::add(P2PRequest r, std::vector<Completion>& done) {
  r.deadline = Clock::now() + r.timeout;
  deadlines_.insert(r.deadline);
  if (r.is_send) {
    sends_[static_cast<size_t>(r.peer)].push_back(std::move(r));
    return;
  }
  int src = -1;
  auto it = find_unexpected(r, &src);
  if (src >= 0) {
    note_taken(src);
    take_unexpected(src, it, std::move(r), done);
    return;
  }
  post_recv(std::move(r));
}

std::list<PointToPoint::Unexpected>::iterator PointToPoint::find_unexpected(const P2PRequest& r, int* src) {
  std::list<Unexpected>::iterator best;
  const int first = r.peer >= 0 ? r.peer : 0;
  const int last = r.peer >= 0 ? r.peer : group_.size() - 1;
  for (int s = first; s <= last; ++s) {
    count_steps(1);
    auto& index = unexpected_by_tag_[static_cast<size_t>(s)];
    auto found = index.find(r.tag);
    if (found == index.end()) continue;
    auto it = found->second.front();
    if (*src < 0 || it->arrival < best->arrival) {
      best = it;
      *src = s;
    }
  }
  if (*src >= 0) {
    // Taken by r whatever comes of it (delivered, claimed while it arrives, or refused).
    auto& index = unexpected_by_tag_[static_cast<size_t>(*src)];
    auto found = index.find(r.tag);
    found->second.pop_front();
    if (found->second.empty()) index.erase(found);
    --held_;
    ++held_changes_;
  }
  return best;
}

void PointToPoint::take_unexpected(int src, std::list<Unexpected>::iterator it, P2PRequest r,
                                   std::vector<Completion>& done) {
  auto& list = unexpected_[static_cast<size_t>(src)];
  if (std::exception_ptr refused = mismatch_of(r, src, it->tag, it->bytes, it->dtype)) {
    if (it->received == it->bytes) {
      finish(r, refused, src, done);
      list.erase(it);
      return;
    }
    // Still arriving: this receive ends once the rest has been drained (deliver), not now.
    // Ended now, it would leave nothing on this rank polling the ring, and a sender whose
    // message is larger than the ring would wait for space that never came.
    // Draining is this recv's own failure, not a stall of the group: the watch must not take
    // it, smaller than the send still pending on the peer, for a size mismatch to end.
    if (r.work) note_refusal_draining(*r.work);
    it->claimed = std::move(r);
    it->refused = true;
    std::vector<uint8_t>().swap(it->data);
    return;
  }
  if (it->received < it->bytes) {
    it->claimed = std::move(r);  // still arriving: delivered when its last chunk is in
    return;
  }
  if (r.bytes) std::memcpy(r.data, it->data.data(), r.bytes);
  finish(r, nullptr, src, done);
  list.erase(it);
}

void PointToPoint::note_taken(int src) {
  const uint64_t n = ++taken_[static_cast<size_t>(src)];
  group_.self().in_taken(src).store(n, std::memory_order_release);
}

std::vector<std::string> PointToPoint::sends_not_taken() const {
  std::vector<std::string> out;
  for (int d = 0; d < group_.size(); ++d) {
    if (d == group_.rank()) continue;
    const uint64_t sent = sent_[static_cast<size_t>(d)];
    const uint64_t taken = group_.of(d).in_taken(group_.rank()).load(std::memory_order_acquire);
    if (taken >= sent) continue;
    uint64_t named = 0;
    for (const Sent& s : sent_texts_[static_cast<size_t>(d)]) {
      if (s.index < taken) continue;
      out.push_back(s.what);
      ++named;
    }
    // Older than the texts kept: counted only.
    if (sent - taken > named) {
      out.push_back(std::to_string(sent - taken - named) + " earlier send(s) to rank " + std::to_string(d));
    }
  }
  return out;
}

bool PointToPoint::sends_awaited() const {
  for (int d = 0; d < group_.size(); ++d) {
    if (d == group_.rank()) continue;
    if (group_.of(d).in_taken(group_.rank()).load(std::memory_order_acquire) >= sent_[static_cast<size_t>(d)]) continue;
    if (group_.of(d).state().load(std::memory_order_acquire) == kActive) return true;
  }
  return false;
}

bool PointToPoint::progress(std::vector<Completion>& done) {
  blocker_.seen = blocker_.word->load(std::memory_order_acquire);
  bool moved = false;
  for (int p = 0; p < group_.size(); ++p) {
    if (p == group_.rank()) continue;
    moved |= pull_chunks(p, done);
    if (!sends_[static_cast<size_t>(p)].empty()) moved |= push_sends(p, done);
  }
  return moved;
}

bool PointToPoint::push_sends(int dest, std::vector<Completion>& done) {
  const size_t d = static_cast<size_t>(dest);
  const SegmentView& self = group_.self();
  const uint64_t depth = static_cast<uint64_t>(group_.layout().depth());
  const size_t payload = group_.layout().chunk_payload();
  auto& queue = sends_[d];
  uint64_t head = head_[d];
  if (head - tail_seen_[d] >= depth) tail_seen_[d] = group_.of(dest).in_tail(group_.rank()).load(std::memory_order_acquire);
  bool moved = false;
  while (!queue.empty() && head - tail_seen_[d] < depth) {
    P2PRequest& r = queue.front();
    const uint64_t len = std::min<uint64_t>(payload, r.bytes - r.done);
    ChunkHeader& h = self.chunk_header(dest, head);
    h.tag = r.tag;
    h.dtype = static_cast<uint32_t>(r.dtype);
    h.message_bytes = r.bytes;
    h.offset = r.done;
    h.bytes = len;
    if (len) std::memcpy(self.chunk_payload(dest, head), r.data + r.done, len);
    r.done += len;
    r.started = true;
    ++head;
    moved = true;
    if (r.done == r.bytes) {
      auto& texts = sent_texts_[d];
      // Trimmed to those the destination may not have taken yet, and bounded (a pair
      // whose receives lag far behind keeps the newest).
      const uint64_t taken = group_.of(dest).in_taken(group_.rank()).load(std::memory_order_acquire);
      while (!texts.empty() && (texts.front().index < taken || texts.size() >= 256)) texts.pop_front();
      // "group 'world' send p2p#0 (float32[8] on cpu) to rank 1, tag 0, 32 bytes"
      std::string what = r.work ? r.work->description() : std::string();
      const size_t group_at = what.find("group '");
      if (group_at == std::string::npos || what.find(" send ", group_at) == std::string::npos) {
        what = describe(r);
      } else {
        what = what.substr(group_at) + " to rank " + std::to_string(dest) + ", tag " + std::to_string(r.tag) + ", " +
               std::to_string(r.bytes) + " bytes";
      }
      texts.push_back({sent_[d]++, std::move(what)});
      finish(r, nullptr, -1, done);
      queue.pop_front();
    }
  }
  if (!moved) return false;
  head_[d] = head;
  self.out_head(dest).store(head, std::memory_order_release);
  Doorbell& bell = group_.of(dest).control().doorbell;
  publish(bell.ring, bell.sleepers);
  return true;
}

bool PointToPoint::pull_chunks(int src, std::vector<Completion>& done) {
  const size_t s = static_cast<size_t>(src);
  const SegmentView& peer = group_.of(src);
  uint64_t tail = tail_[s];
  if (tail >= head_seen_[s]) head_seen_[s] = peer.out_head(group_.rank()).load(std::memory_order_acquire);
  if (tail >= head_seen_[s]) return false;
  while (tail < head_seen_[s]) {
    // A copy: the peer's memory may change under a check made on it in place.
    const ChunkHeader h = peer.chunk_header(group_.rank(), tail);
    check_chunk(src, h);
    if (!incoming_[s].active) start_message(src, h, done);
    deliver(src, h, peer.chunk_payload(group_.rank(), tail), done);
    ++tail;
  }
  tail_[s] = tail;
  group_.self().in_tail(src).store(tail, std::memory_order_release);
  Doorbell& bell = peer.control().doorbell;
  publish(bell.ring, bell.sleepers);
  return true;
}

void PointToPoint::check_chunk(int src, const ChunkHeader& h) const {
  // A sender cuts a message into chunks of chunk_payload bytes, in order, each header
  // repeating the message's tag, size and dtype: anything else would index this rank's
  // buffers where the sender says (a bug or a hostile process on the peer's side).
  const Incoming& in = incoming_[static_cast<size_t>(src)];
  const uint64_t payload = group_.layout().chunk_payload();
  const uint64_t bytes = in.active ? in.bytes : h.message_bytes;
  const uint64_t received = in.active ? in.received : 0;
  std::string wrong;
  if (h.dtype >= static_cast<uint32_t>(kNumDTypes)) {
    wrong = "dtype " + std::to_string(h.dtype) + " is no dtype";
  } else if (h.message_bytes % element_size(dtype_of(h)) != 0) {
    wrong = "a message of " + std::to_string(h.message_bytes) + " bytes is no whole number of " + dtype_name(dtype_of(h));
  } else if (in.active && (h.message_bytes != in.bytes || h.tag != in.tag || h.dtype != in.dtype)) {
    wrong = "it does not continue the message in progress (" + std::to_string(in.bytes) + " bytes, tag " +
            std::to_string(in.tag) + ")";
  } else if (h.offset != received) {
    wrong = "offset " + std::to_string(h.offset) + " where " + std::to_string(received) + " was next";
  } else if (h.bytes != std::min(payload, bytes - received)) {
    wrong = std::to_string(h.bytes) + " bytes where " + std::to_string(std::min(payload, bytes - received)) +
            " were due";
  }
  if (wrong.empty()) return;
  throw GroupFailedError(
      {FailureKind::kOther, src,
       "rank " + std::to_string(src) + " sent a corrupt point-to-point chunk header (tag " + std::to_string(h.tag) +
           ", message of " + std::to_string(h.message_bytes) + " bytes, offset " + std::to_string(h.offset) + ", " +
           std::to_string(h.bytes) + " bytes: " + wrong + "); refused, nothing of it was written"});
}

void PointToPoint::start_message(int src, const ChunkHeader& h, std::vector<Completion>& done) {
  Incoming& in = incoming_[static_cast<size_t>(src)];
  in = Incoming();
  in.active = true;
  in.bytes = h.message_bytes;
  in.tag = h.tag;
  in.dtype = h.dtype;
  if (std::optional<P2PRequest> match = take_recv(src, h.tag)) {
    note_taken(src);
    // A refused message is still consumed to its last chunk before its receive ends (deliver):
    // ended now, nothing would poll the ring, and a sender whose message is larger than the
    // ring would wait for good for space.
    in.refusal = mismatch_of(*match, src, h.tag, h.message_bytes, dtype_of(h));
    // Drained from here on: not a stall for the watch (refused_transfers.h).
    if (in.refusal && match->work) note_refusal_draining(*match->work);
    in.recv = std::move(match);
    return;
  }
  auto& list = unexpected_[static_cast<size_t>(src)];
  list.emplace_back();
  Unexpected& u = list.back();
  u.tag = h.tag;
  u.bytes = h.message_bytes;
  u.dtype = dtype_of(h);
  // Grown as chunks arrive (deliver), so memory follows the bytes that came, not the size
  // a header announces; reserved up to a bound to spare most copies.
  u.data.reserve(std::min<uint64_t>(h.message_bytes, kUnexpectedReserveBytes));
  u.arrival = arrivals_++;
  in.unexpected = &u;
  in.unexpected_at = std::prev(list.end());
  unexpected_by_tag_[static_cast<size_t>(src)][u.tag].push_back(in.unexpected_at);
  ++held_;
  ++held_changes_;
}

void PointToPoint::deliver(int src, const ChunkHeader& h, const uint8_t* payload, std::vector<Completion>& done) {
  Incoming& in = incoming_[static_cast<size_t>(src)];
  if (in.recv) {
    if (h.bytes && !in.refusal) std::memcpy(in.recv->data + h.offset, payload, h.bytes);
  } else if (in.unexpected && in.unexpected->refused) {
    in.unexpected->received += h.bytes;  // drained: its receive has refused it
  } else if (in.unexpected) {
    in.unexpected->data.insert(in.unexpected->data.end(), payload, payload + h.bytes);  // at h.offset (checked)
    in.unexpected->received += h.bytes;
  }
  in.received += h.bytes;
  if (in.received < in.bytes) return;
  in.active = false;
  if (in.recv) {
    finish(*in.recv, in.refusal, src, done);
    in.recv.reset();
    in.refusal = nullptr;
  } else if (in.unexpected) {
    Unexpected* u = in.unexpected;
    auto it = in.unexpected_at;
    in.unexpected = nullptr;
    if (u->claimed) {  // take_unexpected refuses it again if it refused it before
      P2PRequest r = std::move(*u->claimed);
      u->claimed.reset();
      take_unexpected(src, it, std::move(r), done);
    }
  }
}

std::string PointToPoint::held_note(const P2PRequest& r) const {
  // The messages kept for a receive that never came, oldest first: an unclaimed one of the
  // waiting receive's tag most often means that an earlier receive (from any rank, or from
  // another rank) took the message this one waits for, while the peers' reports only say
  // that the awaited rank has nothing pending. Walked only here, when a receive has failed.
  struct Held {
    uint64_t arrival;
    int src;
    int tag;
    uint64_t bytes;
  };
  std::vector<Held> held;
  for (size_t src = 0; src < unexpected_by_tag_.size(); ++src) {
    for (const auto& [tag, kept] : unexpected_by_tag_[src]) {
      for (const auto& it : kept) held.push_back({it->arrival, static_cast<int>(src), it->tag, it->bytes});
    }
  }
  if (held.empty()) return "";
  std::sort(held.begin(), held.end(), [](const Held& a, const Held& b) { return a.arrival < b.arrival; });
  constexpr size_t kNamed = 4;
  std::string text = "; this rank holds " + std::to_string(held.size()) + " message" + (held.size() == 1 ? "" : "s") +
                     " no receive has taken:";
  bool same_tag = false;
  for (size_t i = 0; i < held.size(); ++i) {
    same_tag = same_tag || held[i].tag == r.tag;
    if (i >= kNamed) continue;
    text += std::string(i ? ", " : " ") + "from rank " + std::to_string(held[i].src) + " (tag " +
            std::to_string(held[i].tag) + ", " + std::to_string(held[i].bytes) + " bytes)";
  }
  if (held.size() > kNamed) text += ", and " + std::to_string(held.size() - kNamed) + " more";
  if (same_tag) {
    text += " (one has this receive's tag: an earlier receive -- from any rank, or from another rank -- may have "
            "taken the message this one waits for)";
  }
  return text;
}

void PointToPoint::note_held_messages(Clock::time_point now) {
  if (recvs_.empty()) return;  // none waits unmatched (an ended receive's note went with it)
  const P2PRequest& oldest = recvs_.begin()->second;
  const bool same_recv = oldest.posted == noted_posted_;
  if (same_recv && held_changes_ == noted_changes_) return;  // the usual answer: nothing new
  if (!same_recv && held_ == 0) {
    // A receive that has no note, and needs none.
    noted_posted_ = oldest.posted;
    noted_changes_ = held_changes_;
    return;
  }
  if (now < next_note_ || now - (oldest.deadline - oldest.timeout) < kHeldNoteAfter) return;
  const bool had_note = same_recv && note_set_;
  noted_posted_ = oldest.posted;
  noted_changes_ = held_changes_;
  // held_note's words without their leading "; " ("" clears the note the receive had).
  const std::string text = held_note(oldest);
  note_set_ = text.size() > 2 && oldest.work;
  if (!note_set_ && !had_note) return;  // none to set, none to clear
  next_note_ = now + kHeldNoteAfter;
  if (oldest.work) note_wait(*oldest.work, note_set_ ? text.substr(2) : std::string());
}

void PointToPoint::check_peer(int peer, const P2PRequest& r, Clock::time_point now, bool check_liveness) const {
  if (now >= r.deadline) {
    throw GroupFailedError({FailureKind::kTimeout, peer,
                            describe(r) + " did not finish within " + std::to_string(r.timeout.count()) + " ms" +
                                (r.is_send ? std::string() : held_note(r)),
                            r.work.get()});
  }
  const SegmentView& v = group_.of(peer);
  const bool active = v.state().load(std::memory_order_acquire) == kActive;
  if (active && alive(peer, check_liveness)) return;
  // A rank that sent and then closed or died still has its chunks in its ring: serve them.
  if (!r.is_send && has_unread(peer)) return;
  Failure f = active ? peer_died(group_, peer, "died while this rank waited in a " + describe(r))
                     : failure_of_peer(v, peer);
  f.op = r.work.get();
  throw GroupFailedError(f);
}

bool PointToPoint::has_unread(int peer) const {
  return group_.of(peer).out_head(group_.rank()).load(std::memory_order_acquire) > tail_[static_cast<size_t>(peer)];
}

void PointToPoint::check_any_source(const P2PRequest& r, Clock::time_point now, bool check_liveness) const {
  // A rank that closed the group cleanly only leaves the senders' pool (it may have been a
  // worker done with its share); one that failed or died fails the group as always. The
  // receive fails when nobody is left who could send it anything.
  int senders = 0;
  int closed = -1;
  for (int p = 0; p < group_.size(); ++p) {
    if (p == group_.rank()) continue;
    if (group_.of(p).state().load(std::memory_order_acquire) == kClosed && !has_unread(p)) {
      if (now >= r.deadline) check_peer(p, r, now, false);  // the Timeout, as for any receive
      closed = p;
      continue;
    }
    check_peer(p, r, now, check_liveness);
    ++senders;
  }
  if (senders > 0) return;
  // Named: a rank that closed cleanly published nothing to look up (GroupFailure::record).
  Failure f{FailureKind::kPeerFailure, closed,
            "every other rank has shut the group down (ProcessGroup destroyed or aborted): no rank is left to "
            "send to this " + describe(r),
            r.work.get()};
  throw GroupFailedError(f);
}

bool PointToPoint::alive(int peer, bool check_liveness) const {
  if (!check_liveness) return true;
  int8_t& known = alive_[static_cast<size_t>(peer)];
  if (known < 0) known = group_.alive(peer) ? 1 : 0;  // a system call: once per peer and look
  return known != 0;
}

bool PointToPoint::suspect(Clock::time_point now, bool check_liveness) const {
  if (!deadlines_.empty() && now >= *deadlines_.begin()) return true;
  int closed = 0;
  for (int p = 0; p < group_.size(); ++p) {
    if (p == group_.rank()) continue;
    const size_t i = static_cast<size_t>(p);
    const Incoming& in = incoming_[i];
    const bool named = !sends_[i].empty() || recvs_from_[i] > 0 || in.recv || (in.unexpected && in.unexpected->claimed);
    if (!named && any_source_recvs_ == 0) continue;
    const int state = group_.of(p).state().load(std::memory_order_acquire);
    if (state == kActive) {
      if (!alive(p, check_liveness)) return true;
      continue;
    }
    // A clean close only leaves an any-source receive's pool of senders (check_any_source);
    // a request that names the rank, or a failure, is for the walk to judge.
    if (named || state != kClosed) return true;
    ++closed;
  }
  // Every other rank closed: an any-source receive has nobody left to send it anything.
  return any_source_recvs_ > 0 && closed == group_.size() - 1;
}

void PointToPoint::check(Clock::time_point now, bool check_liveness) {
  note_held_messages(now);
  std::fill(alive_.begin(), alive_.end(), int8_t{-1});
  // Nothing wrong (the usual answer, asked on every blocked poll): no walk over the requests.
  if (!suspect(now, check_liveness)) return;
  // Something is: the walk finds the request that fails, in the order it always did.
  for (const auto& q : sends_) {
    count_steps(q.size());
    for (const P2PRequest& r : q) check_peer(r.peer, r, now, check_liveness);
  }
  auto check_recv = [&](const P2PRequest& r, int src) {
    if (src >= 0) return check_peer(src, r, now, check_liveness);
    check_any_source(r, now, check_liveness);
  };
  count_steps(recvs_.size());
  for (const auto& [posted, r] : recvs_) check_recv(r, r.peer);
  for (int s = 0; s < group_.size(); ++s) {
    if (incoming_[static_cast<size_t>(s)].recv) check_recv(*incoming_[static_cast<size_t>(s)].recv, s);
    for (const Unexpected& u : unexpected_[static_cast<size_t>(s)]) {
      if (u.claimed) check_recv(*u.claimed, s);
    }
  }
}

Clock::time_point PointToPoint::next_deadline() const {
  return deadlines_.empty() ? Clock::time_point::max() : *deadlines_.begin();
}

void PointToPoint::fail_all(const std::function<std::exception_ptr(const Work&)>& error_for,
                            std::vector<Completion>& done) {
  auto fail = [&](const P2PRequest& r) { done.push_back({r.work, error_for(*r.work), -1}); };
  for (auto& q : sends_) {
    for (P2PRequest& r : q) fail(r);
    q.clear();
  }
  for (auto& [posted, r] : recvs_) fail(r);
  recvs_.clear();
  for (ByTag& index : recvs_by_tag_) index.clear();
  any_source_by_tag_.clear();
  std::fill(recvs_from_.begin(), recvs_from_.end(), 0);
  any_source_recvs_ = 0;
  deadlines_.clear();
  for (Incoming& in : incoming_) {
    if (in.recv) fail(*in.recv);
    in = Incoming();
  }
  for (auto& list : unexpected_) {
    for (Unexpected& u : list) {
      if (u.claimed) fail(*u.claimed);
    }
    list.clear();
  }
  for (auto& index : unexpected_by_tag_) index.clear();
  held_ = 0;
  ++held_changes_;
}

}  // namespace shm
}  // namespace distcomm

// PointToPoint::scan_steps() for a test in the process that loaded this plugin (dlsym): the
// plugin's own classes are not exported to it.
extern "C" __attribute__((visibility("default"))) uint64_t distcomm_shm_p2p_scan_steps() {
  return distcomm::shm::PointToPoint::scan_steps();
}
