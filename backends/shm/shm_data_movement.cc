// broadcast, all_gather, gather and scatter over the round protocol: every byte is written
// once into a slot by the rank that has it and copied out, in place, by each rank that
// needs it. A piece per round (pipeline_piece); with several slots the writer runs ahead
// of its readers.
#include <algorithm>

#include "backends/shm/shm_collective.h"

namespace distcomm {
namespace shm {
namespace {

uint8_t* bytes_of(const Tensor& t) { return static_cast<uint8_t*>(t.data()); }

// The piece [r * step, ...) of `total` bytes.
size_t piece(uint64_t r, size_t step, size_t total) { return std::min(step, total - r * step); }

class Broadcast final : public CollectiveOp {
 public:
  Broadcast(const CollectiveSpec& s, const GroupShape& g)
      : data_(bytes_of(s.out)), bytes_(s.out.nbytes()), root_(s.root), rank_(g.rank),
        step_(pipeline_piece(bytes_, g.slot_bytes)) {}

  uint64_t rounds() const override { return ceil_div(bytes_, step_); }
  size_t round_bytes(uint64_t r) const override { return piece(r, step_, bytes_); }
  void write(uint64_t r, const RoundView& v) override {
    if (rank_ == root_) copy_bytes(v.mine, data_ + r * step_, piece(r, step_, bytes_));
  }
  bool waits_for(uint64_t, int peer) const override { return rank_ != root_ && peer == root_; }
  void read(uint64_t r, const RoundView& v) override {
    if (rank_ != root_) copy_bytes(data_ + r * step_, v.of(root_), piece(r, step_, bytes_));
  }

 private:
  uint8_t* const data_;
  const size_t bytes_;
  const int root_, rank_;
  const size_t step_;
};

// all_gather (root < 0) and gather (to root). output is size blocks of input's size.
class Gather final : public CollectiveOp {
 public:
  Gather(const CollectiveSpec& s, const GroupShape& g, bool root_only)
      : out_(bytes_of(s.out)), in_(bytes_of(s.in)), block_(s.in.nbytes()), rank_(g.rank), size_(g.size),
        gets_(!root_only || g.rank == s.root), step_(pipeline_piece(block_, g.slot_bytes)) {}

  uint64_t rounds() const override { return ceil_div(block_, step_); }
  size_t round_bytes(uint64_t r) const override { return piece(r, step_, block_); }
  void write(uint64_t r, const RoundView& v) override {
    // Two plain copies, not one pass writing both (a block into the slot, then the same
    // block into the output, 8 KiB at a time): interleaving the two store streams made a
    // 64 KiB all_gather between 2 ranks 6.3 us a call against 4.9 us like this, and 1 MiB
    // 77-82 us against 61-71 (16 and 64 MiB the same within noise; commit bcbea3b).
    const size_t off = r * step_, len = piece(r, step_, block_);
    copy_bytes(v.mine, in_ + off, len);
    if (gets_) copy_bytes(out_ + static_cast<size_t>(rank_) * block_ + off, in_ + off, len);
  }
  bool waits_for(uint64_t, int) const override { return gets_; }
  void read(uint64_t r, const RoundView& v) override {
    if (!gets_) return;
    const size_t off = r * step_, len = piece(r, step_, block_);
    for (int p = 0; p < size_; ++p) {
      if (p != rank_) copy_bytes(out_ + static_cast<size_t>(p) * block_ + off, v.of(p), len);
    }
  }

 private:
  uint8_t* const out_;
  const uint8_t* const in_;
  const size_t block_;
  const int rank_, size_;
  const bool gets_;
  const size_t step_;
};

// Slot layout on the root: size parts, part p for rank p.
class Scatter final : public CollectiveOp {
 public:
  Scatter(const CollectiveSpec& s, const GroupShape& g)
      : out_(bytes_of(s.out)), in_(bytes_of(s.in)), block_(s.out.nbytes()), root_(s.root), rank_(g.rank),
        size_(g.size), part_(part_bytes(g.slot_bytes, g.size)) {}

  uint64_t rounds() const override { return ceil_div(block_, part_); }
  void write(uint64_t r, const RoundView& v) override {
    if (rank_ != root_) return;
    const size_t off = r * part_, len = piece(r, part_, block_);
    for (int p = 0; p < size_; ++p) {
      uint8_t* dst = p == rank_ ? out_ + off : v.mine + static_cast<size_t>(p) * part_;
      copy_bytes(dst, in_ + static_cast<size_t>(p) * block_ + off, len);
    }
  }
  bool waits_for(uint64_t, int peer) const override { return rank_ != root_ && peer == root_; }
  void read(uint64_t r, const RoundView& v) override {
    if (rank_ == root_) return;
    copy_bytes(out_ + r * part_, v.of(root_) + static_cast<size_t>(rank_) * part_, piece(r, part_, block_));
  }

 private:
  uint8_t* const out_;
  const uint8_t* const in_;
  const size_t block_;
  const int root_, rank_, size_;
  const size_t part_;
};

}  // namespace

OpPtr make_broadcast(const CollectiveSpec& s, const GroupShape& g, OpSpace* space) {
  return place_op<Broadcast>(space, s, g);
}

OpPtr make_all_gather(const CollectiveSpec& s, const GroupShape& g, bool root_only, OpSpace* space) {
  return place_op<Gather>(space, s, g, root_only);
}

OpPtr make_scatter(const CollectiveSpec& s, const GroupShape& g, OpSpace* space) {
  return place_op<Scatter>(space, s, g);
}

}  // namespace shm
}  // namespace distcomm
