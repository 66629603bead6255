#include "backends/shm/shm_layout.h"

#include <algorithm>
#include <cstddef>
#include <new>

namespace distcomm {
namespace shm {
namespace {

constexpr size_t kPageBytes = 4096;

size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }

}  // namespace

static_assert(sizeof(ChunkHeader) <= kLineBytes, "a chunk header fits its line");
static_assert(offsetof(InlineLine, tag) + sizeof(uint64_t) <= 64, "inline data, op and tag share a 64-byte line");
static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free,
              "atomics shared between processes must be lock-free");

Layout::Layout(int size, const ShmConfig& config)
    : size_(size),
      // At least a line per rank and a result line (all_reduce's slices), and room for
      // all_to_all's split sizes (two int64 per rank).
      slot_bytes_(std::max({round_up(config.slot_bytes, kLineBytes), kLineBytes * (static_cast<size_t>(size) + 1),
                            round_up(16 * static_cast<size_t>(size), kLineBytes)})),
      slots_(config.slots),
      chunk_payload_(round_up(config.p2p_chunk_bytes, kLineBytes)),
      depth_(config.p2p_depth),
      first_round_(config.first_round) {
  const size_t n = static_cast<size_t>(size);
  heads_ = round_up(sizeof(ControlBlock), kLineBytes);
  tails_ = heads_ + n * kLineBytes;
  inline_ = tails_ + n * kLineBytes;
  slots_offset_ = round_up(inline_ + static_cast<size_t>(slots_) * kLineBytes, kPageBytes);
  rings_ = round_up(slots_offset_ + static_cast<size_t>(slots_) * slot_bytes_, kPageBytes);
  ring_stride_ = kLineBytes + chunk_payload_;
  ring_bytes_ = round_up(static_cast<size_t>(depth_) * ring_stride_, kPageBytes);
  total_bytes_ = rings_ + n * ring_bytes_;
}

void SegmentView::initialize(int rank, int pid, uint64_t nonce) const {
  ControlBlock* c = new (base_) ControlBlock();
  c->header.magic = kSegmentMagic;
  c->header.nonce = nonce;
  c->header.total_bytes = layout_->total_bytes();
  c->header.version = kLayoutVersion;
  c->header.rank = rank;
  c->header.size = layout_->size();
  c->header.pid = pid;
  c->failure.culprit = -1;
  c->round.posted.store(layout_->first_round(), std::memory_order_relaxed);
  for (int r = 0; r < layout_->slots(); ++r) new (&inline_line(static_cast<uint64_t>(r))) InlineLine{};
  for (int r = 0; r < layout_->size(); ++r) {
    new (&at<Counter>(layout_->out_head_offset(r))) Counter{};
    new (&at<Counter>(layout_->in_tail_offset(r))) Counter{};
  }
}

}  // namespace shm
}  // namespace distcomm
