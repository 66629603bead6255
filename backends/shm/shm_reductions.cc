// all_reduce, reduce and reduce_scatter over the round protocol.
//
// Small messages (up to small_bytes) take one round: every rank copies its input into its
// slot, and each rank that needs the result reduces all the slots itself, in rank order, so
// that every rank computes bit-identical values.
//
// Larger ones are a pipelined reduce-scatter + all-gather. The message goes in chunks of
// size x slice elements; in each round a rank writes the slices of the next chunk that its
// peers own, reduces the slice it owns straight from its peers' slots (each element is
// reduced by one rank only, so every rank ends with the same bits), and copies the
// reductions its peers published in the previous round. One synchronisation per chunk;
// every rank reads and writes about 2x the message, whatever the group size.
#include <algorithm>

#include "backends/shm/shm_collective.h"

namespace distcomm {
namespace shm {
namespace {

uint8_t* bytes_of(const Tensor& t) { return static_cast<uint8_t*>(t.data()); }

// A reduction of `bytes` into dst from every slot of v but this rank's, at `offset`.
ReduceTask reduce_task(uint8_t* dst, size_t bytes, DType dtype, ReduceOp op, const RoundView& v, size_t offset) {
  ReduceTask t;
  t.dst = dst;
  t.view = &v;
  t.offset = offset;
  t.skip = v.rank;
  t.bytes = bytes;
  t.dtype = dtype;
  t.op = op;
  t.average_over = op.kind == ReduceOp::AVG ? v.size : 0;
  return t;
}

// One round; `all`: every rank gets the result (all_reduce), else the root only (reduce).
class OneRoundReduce final : public CollectiveOp {
 public:
  OneRoundReduce(const CollectiveSpec& s, const GroupShape& g, bool all)
      : data_(bytes_of(s.out)), bytes_(s.out.nbytes()), dtype_(s.out.dtype()), op_(s.op), rank_(g.rank),
        size_(g.size), gets_result_(all || g.rank == s.root) {}

  uint64_t rounds() const override { return 1; }
  size_t round_bytes(uint64_t) const override { return bytes_; }
  void write(uint64_t, const RoundView& v) override { copy_bytes(v.mine, data_, bytes_); }
  bool waits_for(uint64_t, int) const override { return gets_result_; }
  void read(uint64_t, const RoundView& v) override {
    if (!gets_result_) return;
    ReduceTask t = reduce_task(data_, bytes_, dtype_, op_, v, 0);
    t.init = v.of(0);  // this rank's own input too comes from its slot: data_ is overwritten
    t.first = 1;
    t.skip = -1;
    run_reduce(t);
  }

 private:
  uint8_t* const data_;
  const size_t bytes_;
  const DType dtype_;
  const ReduceOp op_;
  const int rank_, size_;
  const bool gets_result_;
};

// Reduce-scatter + all-gather in chunks. Slot layout: size data slices (slice p holds this
// rank's input for rank p's share), then one result slice (this rank's reduced share of
// the previous chunk, written during the previous round's read).
class ChunkedReduce final : public CollectiveOp {
 public:
  ChunkedReduce(const CollectiveSpec& s, const GroupShape& g, bool all)
      : data_(bytes_of(s.out)), count_(static_cast<uint64_t>(s.out.numel())), dtype_(s.out.dtype()),
        esize_(element_size(dtype_)), op_(s.op), rank_(g.rank), size_(g.size), all_(all), root_(s.root),
        slice_bytes_(part_bytes(g.slot_bytes, g.size + 1)), slice_elems_(slice_bytes_ / esize_),
        chunk_elems_(slice_elems_ * static_cast<uint64_t>(g.size)), chunks_(ceil_div(count_, chunk_elems_)) {}

  uint64_t rounds() const override { return chunks_ == 0 ? 0 : chunks_ + 1; }

  void write(uint64_t r, const RoundView& v) override {
    if (r >= chunks_) return;
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      const Range s = slice(r, p);
      copy_bytes(v.mine + static_cast<size_t>(p) * slice_bytes_, data_ + s.begin * esize_, s.len * esize_);
    }
  }

  bool waits_for(uint64_t r, int) const override { return r < chunks_ || gathers_here(); }

  void read(uint64_t r, const RoundView& v) override {
    const size_t result_offset = static_cast<size_t>(size_) * slice_bytes_;
    if (r >= 1 && gathers_here()) {
      for (int p = 0; p < size_; ++p) {
        if (p == rank_) continue;
        const Range s = slice(r - 1, p);
        copy_bytes(data_ + s.begin * esize_, v.of(p) + result_offset, s.len * esize_);
      }
    }
    if (r >= chunks_) return;
    const Range s = slice(r, rank_);
    uint8_t* const own = data_ + s.begin * esize_;
    // In place where this rank gets the result (own holds its input); off the root of a
    // reduce, into the slot, since the input must stay unchanged.
    ReduceTask t = reduce_task(gathers_here() ? own : v.next + result_offset, s.len * esize_, dtype_, op_, v,
                               static_cast<size_t>(rank_) * slice_bytes_);
    if (!gathers_here()) t.init = own;
    if (all_) t.copy_to = v.next + result_offset;
    run_reduce(t);
  }

 private:
  struct Range {
    uint64_t begin, len;  // elements
  };

  bool gathers_here() const { return all_ || rank_ == root_; }

  // Rank p's share of chunk k: equal shares of whole cache lines, the last ones possibly short.
  Range slice(uint64_t k, int p) const {
    const uint64_t base = k * chunk_elems_;
    const uint64_t len = std::min(chunk_elems_, count_ - base);
    const uint64_t line = kLineBytes / esize_;
    const uint64_t share = ceil_div(ceil_div(len, static_cast<uint64_t>(size_)), line) * line;
    const uint64_t b = std::min(static_cast<uint64_t>(p) * share, len);
    const uint64_t e = std::min(b + share, len);
    return {base + b, e - b};
  }

  uint8_t* const data_;
  const uint64_t count_;
  const DType dtype_;
  const uint64_t esize_;
  const ReduceOp op_;
  const int rank_, size_;
  const bool all_;
  const int root_;
  const uint64_t slice_bytes_, slice_elems_, chunk_elems_, chunks_;
};

// Slot layout: size parts; part p holds this rank's input for rank p's output.
class ChunkedReduceScatter final : public CollectiveOp {
 public:
  ChunkedReduceScatter(const CollectiveSpec& s, const GroupShape& g)
      : out_(bytes_of(s.out)), in_(bytes_of(s.in)), block_bytes_(s.out.nbytes()), dtype_(s.out.dtype()),
        op_(s.op), rank_(g.rank), size_(g.size), part_(part_bytes(g.slot_bytes, g.size)) {}

  uint64_t rounds() const override { return ceil_div(block_bytes_, part_); }

  void write(uint64_t r, const RoundView& v) override {
    const size_t off = r * part_, len = std::min(part_, block_bytes_ - off);
    for (int p = 0; p < size_; ++p) {
      if (p != rank_) copy_bytes(v.mine + static_cast<size_t>(p) * part_, in_ + p * block_bytes_ + off, len);
    }
  }

  bool waits_for(uint64_t, int) const override { return true; }

  void read(uint64_t r, const RoundView& v) override {
    const size_t off = r * part_;
    ReduceTask t = reduce_task(out_ + off, std::min(part_, block_bytes_ - off), dtype_, op_, v,
                               static_cast<size_t>(rank_) * part_);
    t.init = in_ + static_cast<size_t>(rank_) * block_bytes_ + off;
    run_reduce(t);
  }

 private:
  uint8_t* const out_;
  const uint8_t* const in_;
  const size_t block_bytes_;
  const DType dtype_;
  const ReduceOp op_;
  const int rank_, size_;
  const size_t part_;
};

OpPtr reduction(const CollectiveSpec& s, const GroupShape& g, bool all, OpSpace* space) {
  if (s.out.nbytes() <= g.small_bytes && s.out.nbytes() <= g.slot_bytes) {
    return place_op<OneRoundReduce>(space, s, g, all);
  }
  return place_op<ChunkedReduce>(space, s, g, all);
}

}  // namespace

OpPtr make_all_reduce(const CollectiveSpec& s, const GroupShape& g, OpSpace* space) {
  return reduction(s, g, true, space);
}

OpPtr make_reduce(const CollectiveSpec& s, const GroupShape& g, OpSpace* space) {
  return reduction(s, g, false, space);
}

OpPtr make_reduce_scatter(const CollectiveSpec& s, const GroupShape& g, OpSpace* space) {
  return place_op<ChunkedReduceScatter>(space, s, g);
}

}  // namespace shm
}  // namespace distcomm
