// How a send of more than max_count_per_call elements travels: a small header, then its
// pieces (one MPI message per call, all sent at once, in order: mpi_op.h).
//
// The receiver must know the sender's total before any piece lands in its tensor. Compared
// piece by piece, a recv of another size took the first pieces into the tensor, refused the
// one that differed and left the sender's later pieces queued, where the next recv from that
// rank took them (wrong data) or they were never taken (a send that timed out). A split
// send therefore first sends this header, on the user's tag with a dtype code that no dtype
// has (p2p_tag.h); the recv reads it, compares total and dtype with its tensor, and either
// receives the pieces into the tensor or drains every one of them into scratch (the recv
// alone fails; the tensor is untouched and the next message from that rank is intact).
// An unsplit send has no header: its one message's size is its total, so the common path
// costs what it did (one probe, one receive), and a split one costs one 24-byte message more.
// The receiver follows the header's piece size, not its own setting.
#pragma once

#include <climits>
#include <cstdint>
#include <string>

#include "api/dtype.h"
#include "backends/mpi/p2p_tag.h"

namespace distcomm {
namespace mpi {

// The tag code of a header (the low bits where other messages carry their dtype).
constexpr int kSplitHeaderCode = (1 << kDTypeTagBits) - 1;
static_assert(kNumDTypes <= kSplitHeaderCode, "the split header's code must be no dtype's code");

// Tells a header from a message of another build that happens to carry the same code.
constexpr int32_t kSplitHeaderMagic = 0x44435348;  // "DCSH"

struct SplitHeader {
  int64_t total = 0;  // elements of the whole send
  int64_t piece = 0;  // elements per piece (the last one holds the rest)
  int32_t dtype = 0;  // the sender's DType
  int32_t magic = kSplitHeaderMagic;
};
static_assert(sizeof(SplitHeader) == 24, "the header's wire size");

inline int split_header_tag(int tag) { return (tag << kDTypeTagBits) | kSplitHeaderCode; }
inline bool is_split_header(int wire_tag) { return (wire_tag & ((1 << kDTypeTagBits) - 1)) == kSplitHeaderCode; }

// How many pieces follow the header.
inline int64_t piece_count(const SplitHeader& h) { return (h.total + h.piece - 1) / h.piece; }
// Elements of piece `index`.
inline int64_t piece_elements(const SplitHeader& h, int64_t index) {
  const int64_t rest = h.total - index * h.piece;
  return rest < h.piece ? rest : h.piece;
}

// "" for a header a split send makes; else what is wrong with it (its pieces cannot be
// counted, so the recv cannot drain them: the group fails).
inline std::string split_header_problem(const SplitHeader& h) {
  if (h.magic != kSplitHeaderMagic) return "its magic number is " + std::to_string(h.magic);
  if (h.dtype < 0 || h.dtype >= kNumDTypes) return "its dtype code " + std::to_string(h.dtype) + " is no dtype's";
  if (h.piece < 1 || h.piece > INT_MAX) return "its piece of " + std::to_string(h.piece) + " elements is not 1..INT_MAX";
  if (h.total <= h.piece || h.total > INT64_MAX / 16) {
    return "its total of " + std::to_string(h.total) + " elements is no split of pieces of " + std::to_string(h.piece);
  }
  return "";
}

}  // namespace mpi
}  // namespace distcomm
