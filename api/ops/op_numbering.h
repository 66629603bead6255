// Numbers a group's ops and gives each its context (OpContext): its sequence number in
// its kind's sequence, its resolved timeout, its description ("rank 1/4 group 'world'
// all_reduce #12 (float32[1000] on cpu)") and its fingerprint's start. Also the ordinal of
// each point-to-point transfer between two ranks with one tag, and how many ops of each
// type this rank issued (DISTCOMM_DEBUG=INFO's count when the group ends).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "api/ops/op_spec.h"

namespace distcomm {

class OpNumbering {
 public:
  OpNumbering(std::string where_prefix, std::chrono::milliseconds group_timeout);

  // The op's context: numbered, described, its fingerprint filled from spec (for point to
  // point ops, a peer known now gets the transfer's ordinal). ordinal_epoch (when not null)
  // gets that transfer's epoch (next_ordinal), 0 for any other op: kept beside the
  // fingerprint, not in it, because plugins build and pass OpFingerprint objects and its
  // layout is theirs (plugin.h); the core keeps it per Work (work_marks.h).
  OpContext next(const OpSpec& spec, uint64_t* ordinal_epoch = nullptr);
  // The same, into ctx (fresh but for its description, which is overwritten; its buffer is
  // reused where it is large enough).
  void next_into(const OpSpec& spec, OpContext& ctx, uint64_t* ordinal_epoch = nullptr);
  // The next transfer's number among this rank's sends (or recvs) with `peer` and `tag`: a
  // send and a recv pair up when their numbers agree (messages between two ranks with one
  // tag do not overtake each other).
  //
  // What reads it: the fingerprint's "(transfer N)", the progress report's matching of a
  // pending send with its peer's pending recv (diagnostics only), and DETAIL's store key
  // for a send's fingerprint, which its recv waits for. The data path never does.
  //
  // Memory: a program may use a new tag for every message (tag = step * k + microbatch),
  // so counting every (direction, peer, tag) ever used grew without bound (~65-160 B a
  // tag). Each (direction, peer) keeps at most kTagsPerPeer tags, least recently used
  // dropped first; a dropped tag used again numbers from 0. The rule reads only this
  // rank's own sequence of tags with that peer, which its peer sees the same way when it
  // posts its recvs in the order of the sends: both drop the same tags. A peer that posts
  // recvs of other tags in another order may drop a tag at another time, and the two
  // sides' numbers for that tag can then differ: only the diagnostics above are affected.
  // DETAIL must not be (its recv would wait for a key never posted), so DetailChecks
  // calls keep_every_ordinal(), and at DETAIL memory still grows with the tags used.
  //
  // epoch (when not null) gets what tells the diagnostics whether the two sides' numbers
  // for this tag can be compared (PendingOp::ordinal_epoch): a hash of the pair's
  // drops so far -- each dropped tag and how many transfers it had counted -- as it was
  // when this tag's count began, 0 before the pair's first drop. Sides whose epochs for a
  // tag agree have discarded the same number of its transfers (but for a 2^-64 chance),
  // so their numbers name the same transfers; sides that used tags in other orders may not
  // agree, and then their numbers are not compared (p2p_verdict.h).
  int64_t next_ordinal(bool is_send, int peer, int tag, uint64_t* epoch = nullptr);
  // From now on no tag's count is dropped (DISTCOMM_DEBUG=DETAIL: see next_ordinal).
  void keep_every_ordinal();
  // How many (direction, peer, tag) counts are kept now (for tests of the bound).
  size_t ordinal_keys() const;
  static constexpr size_t kTagsPerPeer = 256;
  // The sequence number the next collective will get.
  uint64_t next_seq() const { return seq_.load(); }
  // Ops the program issued on this rank, of one type (not the group's own internal ones).
  uint64_t issued(OpType op) const { return issued_[static_cast<size_t>(op)].load(std::memory_order_relaxed); }

 private:
  friend class NumberedOp;
  // The description of an op numbered seq, into out: where_prefix, the op, its number, its tensor.
  void describe(const OpSpec& spec, bool p2p, uint64_t seq, std::string& out);

  const std::string where_prefix_;
  const std::chrono::milliseconds group_timeout_;
  // The last op's description around its number, for the next op of the same kind on a
  // tensor of the same dtype, device and shape: a training loop or a benchmark issues the
  // same ops over and over, and describing the tensor afresh (dtype name, shape, device)
  // was ~1,575 of the 7,198 instructions distcomm spent on an 8-byte all_reduce over shm
  // (callgrind; 804 with this cache, docs/performance.md).
  struct LastDescription {
    bool valid = false;
    OpType type = OpType::kAllReduce;
    bool p2p = false;
    bool has_tensor = false;
    DType dtype = DType::kFloat32;
    Device device;
    std::vector<int64_t> shape;
    std::string suffix;
    std::string head;  // where_prefix, op name, " #" or " p2p#"
    std::string tail;  // " (float32[1000] on cpu)" and the suffix
  };
  // Held while an op reads or fills last_ (a try-lock as an atomic: no mutex call per op);
  // an op described while another is, on another thread, is described afresh.
  std::atomic<bool> last_taken_{false};
  LastDescription last_;
  // A description's buffer, lent to one op at a time (NumberedOp).
  std::atomic<bool> buffer_lent_{false};
  std::string buffer_;
  std::atomic<uint64_t> seq_{0};
  std::atomic<uint64_t> p2p_seq_{0};
  std::atomic<uint64_t> internal_seq_{0};
  std::array<std::atomic<uint64_t>, static_cast<size_t>(OpType::kBatchP2P) + 1> issued_{};
  // One (direction, peer)'s tags: counts, and the tags from most to least recently used.
  struct PeerTags {
    struct Count {
      int64_t next = 0;
      uint64_t epoch = 0;  // `drops` when this count began (next_ordinal's epoch)
      std::list<int>::iterator in_order;
    };
    std::unordered_map<int, Count> counts;
    std::list<int> order;
    uint64_t drops = 0;  // hash of the (tag, count) pairs dropped so far, in order; 0: none
  };
  mutable std::mutex ordinals_mu_;
  bool keep_every_ordinal_ = false;
  // Keyed by peer * 2 + is send: one entry per (direction, peer) this rank talked to.
  std::unordered_map<int64_t, PeerTags> transfers_;
};

// An op numbered for ProcessGroup::issue: its context (OpNumbering::next), whose description
// is written into a buffer the numbering keeps from op to op, so that describing an op
// allocates nothing (an allocation and its free were ~200 of the ~7,100 instructions of an
// 8-byte all_reduce over shm). One op holds the buffer at a time, until it is issued; an op
// issued meanwhile (on another thread, or from inside a backend's call, as the hierarchy's
// are) describes into a string of its own, as before. Backends get the context by const
// reference for the call only (plugin.h), and copy what they keep.
class NumberedOp {
 public:
  NumberedOp(OpNumbering& numbering, const OpSpec& spec, uint64_t* ordinal_epoch = nullptr);
  ~NumberedOp();
  NumberedOp(const NumberedOp&) = delete;
  NumberedOp& operator=(const NumberedOp&) = delete;
  const OpContext& ctx() const { return ctx_; }

 private:
  void give_back();

  OpNumbering& numbering_;
  bool lent_;  // ctx_.description holds the numbering's buffer
  OpContext ctx_;
};

}  // namespace distcomm
