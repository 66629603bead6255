// all_to_all with any split sizes over the round protocol.
//
// Round 0 exchanges the split sizes: every rank writes its element counts (to each rank,
// and expected from each rank), so every rank learns the whole matrix, checks that each
// pair agrees (a mismatch fails the op identically on every rank, naming the pair), and
// derives the same number of data rounds. In each data round, every rank writes the next
// piece of its block for each peer into that peer's part of its slot, and copies its own
// pieces out of its peers' slots.
#include <algorithm>
#include <cstring>

#include "backends/shm/shm_collective.h"

namespace distcomm {
namespace shm {
namespace {

class AllToAll final : public CollectiveOp {
 public:
  AllToAll(const CollectiveSpec& s, const GroupShape& g)
      : out_(static_cast<uint8_t*>(s.out.data())), in_(static_cast<const uint8_t*>(s.in.data())),
        esize_(element_size(s.in.dtype())), rank_(g.rank), size_(g.size), part_(part_bytes(g.slot_bytes, g.size)),
        my_in_counts_(s.in_counts), my_out_counts_(s.out_counts),
        sends_(static_cast<size_t>(g.size) * static_cast<size_t>(g.size), 0) {
    in_offsets_ = offsets(my_in_counts_);
    out_offsets_ = offsets(my_out_counts_);
  }

  uint64_t rounds() const override { return 1 + data_rounds_; }

  void write(uint64_t r, const RoundView& v) override {
    if (r == 0) {
      // size counts sent, then size counts expected (int64 each).
      std::memcpy(v.mine, my_in_counts_.data(), sizeof(int64_t) * my_in_counts_.size());
      std::memcpy(v.mine + sizeof(int64_t) * size_, my_out_counts_.data(), sizeof(int64_t) * my_out_counts_.size());
      return;
    }
    const uint64_t off = (r - 1) * part_;
    for (int d = 0; d < size_; ++d) {
      const uint64_t bytes = bytes_between(rank_, d);
      if (off >= bytes) continue;
      const size_t len = std::min<uint64_t>(part_, bytes - off);
      if (d == rank_) {
        copy_bytes(out_ + out_offsets_[d] * esize_ + off, in_ + in_offsets_[d] * esize_ + off, len);
      } else {
        copy_bytes(v.mine + static_cast<size_t>(d) * part_, in_ + in_offsets_[d] * esize_ + off, len);
      }
    }
  }

  bool waits_for(uint64_t r, int peer) const override {
    return r == 0 || bytes_between(peer, rank_) > (r - 1) * part_;
  }

  void read(uint64_t r, const RoundView& v) override {
    if (r == 0) {
      learn_sizes(v);
      return;
    }
    const uint64_t off = (r - 1) * part_;
    for (int s = 0; s < size_; ++s) {
      const uint64_t bytes = bytes_between(s, rank_);
      if (s == rank_ || off >= bytes) continue;
      copy_bytes(out_ + out_offsets_[s] * esize_ + off, v.of(s) + static_cast<size_t>(rank_) * part_,
                 std::min<uint64_t>(part_, bytes - off));
    }
  }

 private:
  static std::vector<uint64_t> offsets(const std::vector<int64_t>& counts) {
    std::vector<uint64_t> o(counts.size(), 0);
    for (size_t i = 1; i < counts.size(); ++i) o[i] = o[i - 1] + static_cast<uint64_t>(counts[i - 1]);
    return o;
  }

  uint64_t bytes_between(int src, int dst) const {
    return sends_[static_cast<size_t>(src) * static_cast<size_t>(size_) + static_cast<size_t>(dst)] * esize_;
  }

  // Every rank reads the same slots, so every rank reaches the same verdict.
  void learn_sizes(const RoundView& v) {
    std::vector<int64_t> sent(static_cast<size_t>(size_) * size_), expected(static_cast<size_t>(size_) * size_);
    for (int s = 0; s < size_; ++s) {
      std::memcpy(&sent[static_cast<size_t>(s) * size_], v.of(s), sizeof(int64_t) * size_);
      std::memcpy(&expected[static_cast<size_t>(s) * size_], v.of(s) + sizeof(int64_t) * size_,
                  sizeof(int64_t) * size_);
    }
    uint64_t largest = 0;
    for (int s = 0; s < size_; ++s) {
      for (int d = 0; d < size_; ++d) {
        const int64_t n = sent[static_cast<size_t>(s) * size_ + d];
        const int64_t want = expected[static_cast<size_t>(d) * size_ + s];
        if (n != want) {
          // Worded as api's all_to_all_mismatches(), which the other backends report.
          throw AgreedError("all_to_all split sizes disagree: rank " + std::to_string(s) + " sends " +
                            std::to_string(n) + " elements to rank " + std::to_string(d) + ", which expects " +
                            std::to_string(want) + " (every rank found this; the group stays usable)");
        }
        sends_[static_cast<size_t>(s) * size_ + d] = static_cast<uint64_t>(n);
        largest = std::max<uint64_t>(largest, static_cast<uint64_t>(n) * esize_);
      }
    }
    data_rounds_ = ceil_div(largest, part_);
  }

  uint8_t* const out_;
  const uint8_t* const in_;
  const uint64_t esize_;
  const int rank_, size_;
  const uint64_t part_;
  const std::vector<int64_t> my_in_counts_, my_out_counts_;
  std::vector<uint64_t> in_offsets_, out_offsets_;
  std::vector<uint64_t> sends_;  // sends_[s * size + d]: elements rank s sends rank d
  uint64_t data_rounds_ = 0;
};

}  // namespace

OpPtr make_all_to_all(const CollectiveSpec& s, const GroupShape& g, OpSpace* space) {
  return place_op<AllToAll>(space, s, g);  // too large for the space: on the heap
}

}  // namespace shm
}  // namespace distcomm
