// What one rank's shared segment holds, and where.
//
// Every rank of a group owns one segment (a memfd the others map, shm_segment.h). The owner
// writes everything in it except the `sleepers` counts, which peers bump while they sleep on
// the owner's futex words. One writer per line keeps the lines from bouncing between cores.
//
//   ControlBlock     header, the round line (collectives), the state line, the p2p doorbell,
//                    the failure record, the running collective's description
//   out_head[size]   p2p: chunks this rank has published to each destination
//   in_tail[size]    p2p: chunks this rank has consumed from each source
//   inline[slots]    a round's op, tag and few bytes in one line, one per round (round % slots)
//   slots            `slots` staging areas of `slot_bytes`, one per round (round % slots)
//   rings            p2p: per destination, `p2p_depth` chunks (ChunkHeader + payload)
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "backends/shm/shm_config.h"
#include "backends/shm/shm_op_line.h"

namespace distcomm {
namespace shm {

// Two 64-byte cache lines: the adjacent-line prefetcher fetches pairs, so fields of two
// writers closer than this would still share traffic.
constexpr size_t kLineBytes = 128;
constexpr uint64_t kSegmentMagic = 0x6d68732d6d6d6f63ULL;  // "comm-shm"
// 4: a source's counter line also says how many of its messages a receive took (taken).
constexpr uint32_t kLayoutVersion = 4;

enum RankState : uint32_t {
  kActive = 0,
  kFailed = 1,  // the failure record says why
  kClosed = 2,  // the group was shut down on that rank; it posts no more rounds
};

struct SegmentHeader {
  uint64_t magic;
  uint64_t nonce;  // random per segment, published with the segment's address
  uint64_t total_bytes;
  uint32_t version;
  int32_t rank;
  int32_t size;
  int32_t pid;
};

// Collectives advance in rounds numbered alike on every rank (shm_rounds.h).
struct alignas(kLineBytes) RoundLine {
  std::atomic<uint64_t> posted;    // rounds published: round r's slot is ready once posted > r
  std::atomic<uint32_t> wake;      // futex word, changed by every post and state change
  std::atomic<uint32_t> sleepers;  // peers asleep on `wake` (they add and remove themselves)
  std::atomic<int32_t> cpu;        // the core the owner last posted from (see Backoff)
};

// RankState, on a line of its own: it is read at every op's start and changes about never,
// so the read hits the cache, where on the round line (written at every post) it would be a
// miss between cores each time.
struct alignas(kLineBytes) StateLine {
  std::atomic<uint32_t> value;
};

// Every round's line: the op the round belongs to and the tag that says which round it is
// (round + 1), and, for a round that carries at most kInlineBytes, its data, in one 64-byte
// line: a peer that sees the tag has the data and the op's identity too, one transfer
// between cores instead of two (the round line, then the slot).
//
// `op` is the agreement hash of the op's fingerprint (api/diagnostics/op_fingerprint.h: op, sequence
// number, dtype, count, root, reduction). A reader compares it with its own op's before it
// reads the round's data, inline or in the slot: ranks that disagree never read or reduce
// each other's bytes (shm_rounds.h). The tag is 64-bit, so it never matches a line's
// earlier use (a 32-bit one would after 2^32 rounds).
constexpr size_t kInlineBytes = 48;
struct alignas(kLineBytes) InlineLine {
  uint8_t data[kInlineBytes];
  uint64_t op;               // written before the tag; read after it (or the post) is seen
  std::atomic<uint64_t> tag;
};

// Point-to-point: peers ring it after they publish a chunk to this rank or consume one of
// its chunks; this rank sleeps on it while its p2p ops wait. A rank that also waits for a
// peer's round (a collective) then sets `round_of` to that peer + 1 and registers as a
// sleeper on the peer's round line: the peer's post rings this doorbell too (and a failure
// or close rings every peer's), so one sleep hears both.
struct alignas(kLineBytes) Doorbell {
  std::atomic<uint32_t> ring;
  std::atomic<uint32_t> sleepers;
  std::atomic<int32_t> round_of;  // 0: none
};

enum class FailureKind : uint32_t {
  kPeerFailure = 0,
  kTimeout = 1,
  kOther = 2,
  kShutDown = 3,
  kDesync = 4,
  kInvalidArgument = 5,
};

// Why this rank's group failed: written once, before state becomes kFailed (release).
struct alignas(kLineBytes) PublishedFailure {
  int32_t culprit;  // the rank blamed (a dead one, or this rank when it timed out); -1 unknown
  uint32_t kind;    // FailureKind
  char message[1000];
};

// The collective this rank runs now (shm_op_line.h): written when it starts, before its
// first post; read by a peer whose round's mark differs.
struct alignas(kLineBytes) OpLine {
  OpDescription op;
};

struct ControlBlock {
  alignas(kLineBytes) SegmentHeader header;
  RoundLine round;
  StateLine state;
  Doorbell doorbell;
  PublishedFailure failure;
  OpLine current;
};

struct alignas(kLineBytes) Counter {
  std::atomic<uint64_t> value;
  // in_tail(src)'s line only: how many of src's messages a receive of this rank has taken
  // (matched: delivered, or refused as another size or dtype). The sender compares it with
  // its own count when its group is destroyed: a send completes once its message is in the
  // ring, so this is how a message that no receive ever took is told (PointToPoint::
  // sends_not_taken). Written by this rank only; the line had room (a zeroed segment starts it at 0).
  std::atomic<uint64_t> taken;
};

// Starts every p2p ring slot; published by the sender's out_head (release).
struct ChunkHeader {
  int32_t tag;
  uint32_t dtype;          // the message's DType: a recv of another dtype is refused
  uint64_t message_bytes;  // the whole message
  uint64_t offset;         // of this chunk in the message
  uint64_t bytes;          // of this chunk
};

// Offsets in a segment, the same on every rank of a group.
class Layout {
 public:
  Layout(int size, const ShmConfig& config);

  int size() const { return size_; }
  size_t slot_bytes() const { return slot_bytes_; }
  int slots() const { return slots_; }
  size_t chunk_payload() const { return chunk_payload_; }
  int depth() const { return depth_; }
  uint64_t first_round() const { return first_round_; }
  size_t total_bytes() const { return total_bytes_; }
  // Where the p2p rings start (a page boundary): what comes before is used by every
  // collective, the rings only by the pairs that send to each other.
  size_t rings_offset() const { return rings_; }

  size_t out_head_offset(int dest) const { return heads_ + static_cast<size_t>(dest) * kLineBytes; }
  size_t in_tail_offset(int src) const { return tails_ + static_cast<size_t>(src) * kLineBytes; }
  size_t slot_offset(uint64_t round) const { return slots_offset_ + (round % static_cast<uint64_t>(slots_)) * slot_bytes_; }
  size_t inline_offset(uint64_t round) const { return inline_ + (round % static_cast<uint64_t>(slots_)) * kLineBytes; }
  size_t ring_slot_offset(int dest, uint64_t index) const {
    return rings_ + static_cast<size_t>(dest) * ring_bytes_ + (index % static_cast<uint64_t>(depth_)) * ring_stride_;
  }

 private:
  int size_;
  size_t slot_bytes_;
  int slots_;
  size_t chunk_payload_;
  int depth_;
  uint64_t first_round_;
  size_t heads_, tails_, inline_, slots_offset_, rings_;
  size_t ring_stride_, ring_bytes_;
  size_t total_bytes_;
};

// Typed access to one mapped segment.
class SegmentView {
 public:
  SegmentView() = default;
  SegmentView(uint8_t* base, const Layout* layout) : base_(base), layout_(layout) {}

  ControlBlock& control() const { return *reinterpret_cast<ControlBlock*>(base_); }
  RoundLine& round_line() const { return control().round; }
  std::atomic<uint32_t>& state() const { return control().state.value; }  // RankState
  InlineLine& inline_line(uint64_t round) const { return at<InlineLine>(layout_->inline_offset(round)); }
  std::atomic<uint64_t>& out_head(int dest) const { return at<Counter>(layout_->out_head_offset(dest)).value; }
  std::atomic<uint64_t>& in_tail(int src) const { return at<Counter>(layout_->in_tail_offset(src)).value; }
  // Messages from src that a receive of this rank has taken (Counter::taken).
  std::atomic<uint64_t>& in_taken(int src) const { return at<Counter>(layout_->in_tail_offset(src)).taken; }
  uint8_t* slot(uint64_t round) const { return base_ + layout_->slot_offset(round); }
  ChunkHeader& chunk_header(int dest, uint64_t index) const {
    return at<ChunkHeader>(layout_->ring_slot_offset(dest, index));
  }
  uint8_t* chunk_payload(int dest, uint64_t index) const {
    return base_ + layout_->ring_slot_offset(dest, index) + kLineBytes;
  }

  // Constructs the shared atomics and header in a fresh (zeroed) segment; its rounds
  // start at the layout's first_round (posted says that many are done).
  void initialize(int rank, int pid, uint64_t nonce) const;

 private:
  template <typename T>
  T& at(size_t offset) const {
    return *reinterpret_cast<T*>(base_ + offset);
  }
  uint8_t* base_ = nullptr;
  const Layout* layout_ = nullptr;
};

}  // namespace shm
}  // namespace distcomm
