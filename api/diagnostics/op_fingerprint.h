// OpFingerprint: what one rank says an op is.
//
// Every rank of a group must issue the same collectives in the same order, and the two
// sides of a point-to-point transfer must agree on its size. When they do not, a library
// underneath may exchange mismatched buffers: a crash on its thread, corrupted memory, or
// wrong numbers reported as success. A fingerprint is how ranks check: the ProcessGroup
// fills one per op (OpContext::fingerprint), backends keep mismatched ops from moving bytes
// with its agreement hash (gloo puts it in its tags, mpi compares it before a collective),
// the debug checks compare whole fingerprints across ranks (DISTCOMM_DEBUG=DETAIL), and a
// stalled op's fingerprint is what its rank publishes when a peer asks why.
//
// Part of a collective's fingerprint is the same on every rank of a correct program: the
// op, its sequence number, dtype, the element count each rank contributes, root and
// reduction. agreement_hash() covers exactly that part. The rest may differ between ranks
// and is checked pairwise: the shape (only the count must match), all_to_all's splits
// (what rank s sends rank d is what d expects from s), and a point-to-point op's side
// (a send to d pairs with a recv from s of the same tag, count and dtype; see
// p2p_hash()).
//
// Plain data, cheap to fill (no allocation but all_to_all's splits), so that every op can
// carry one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "api/dtype.h"
#include "api/reduce_op.h"
#include "api/tensor.h"
#include "api/work.h"

namespace distcomm {

struct OpFingerprint {
  static constexpr int kMaxDims = 6;  // deeper shapes keep their last dims folded into the 6th

  OpType op = OpType::kBarrier;
  // The group's collective sequence number, or its point-to-point one when p2p.
  uint64_t seq = 0;
  bool p2p = false;
  // One of the group's own host messages (ProcessGroup::exchange over collectives).
  bool internal = false;
  bool has_tensor = false;
  DType dtype = DType::kFloat32;
  // The elements each rank contributes: the tensor of all_reduce, broadcast, reduce and
  // point-to-point ops, all_gather's and gather's input, scatter's and reduce_scatter's
  // output. all_to_all: this rank's input (ranks may differ; the splits say what must agree).
  int64_t count = 0;
  uint8_t ndim = 0;
  int64_t dims[kMaxDims] = {};
  // The root of broadcast, reduce, gather, scatter (-1 for ops without one). Point to
  // point: the peer, dst or src (-1: any source).
  int32_t root = -1;
  int32_t tag = 0;  // point to point
  // Point to point: which transfer between this pair and tag this is (0 for the first send
  // to that peer with that tag, ...), counted per direction; -1 for a recv from any source.
  // A send and a recv pair up when their (src, dst, tag, ordinal) agree.
  int64_t ordinal = 0;
  bool has_reduction = false;
  ReduceOp reduction;  // as requested (AVG, PREMUL_SUM with its factor)
  std::vector<int64_t> send_counts, recv_counts;  // all_to_all: elements to / from each rank

  // dtype, count and shape from t.
  void set_tensor(const Tensor& t);
  std::vector<int64_t> shape() const;

  // A hash of the fields every rank of a correct program agrees on (collectives). Equal on
  // all ranks of a correct program; any difference in op, seq, dtype, count, root or
  // reduction changes it (but for a 2^-64 chance).
  uint64_t agreement_hash() const;
  // Point to point: a hash of (tag, dtype, count), equal for a send and the recv it pairs with.
  uint64_t p2p_hash() const;
  // all_to_all on rank `rank`: the wrapping sum of hash(rank, d, what it sends d) over its
  // sends minus hash(s, rank, what it expects from s) over its receives. Summed over every
  // rank of the group it is 0 when every pair agrees, and anything else when one does not
  // (but for a 2^-64 chance): one integer per rank checks all n^2 pairs.
  uint64_t split_pairs_sum(int rank) const;

  // "all_reduce #11 float32[10] sum", "broadcast #3 int64[2, 2] root 1",
  // "send p2p#4 float32[4] to 1 tag 0 (transfer 2)", "all_to_all #5 float32 sends [1, 2] receives [2, 1]"
  std::string describe() const;
  // The fields of this collective's fingerprint that differ from other's, "" when they
  // agree: "count 10 vs 20, dtype float32 vs int32". Shapes count only under `shapes`.
  std::string differences(const OpFingerprint& other, bool shapes = false) const;

  // One line of text, and back (nullopt for text that is not one).
  std::string encode() const;
  static std::optional<OpFingerprint> decode(const std::string& text);
};

// What each rank said about the same op, as a table: ranks that agree share a line.
//   ranks [0, 2]: all_reduce #11 float32[10] sum
//   rank 1:       all_reduce #11 float32[20] sum
// A rank with no fingerprint (nullopt) is listed as `missing_text`.
std::string fingerprint_table(const std::vector<std::optional<OpFingerprint>>& by_rank,
                              const std::string& missing_text = "(nothing)");

// The same for any text per rank (text_by_rank[r] is rank r's).
std::string rank_table(const std::vector<std::string>& text_by_rank);

// all_to_all: the pairs (s, d) where rank s sends d another count than d expects from s,
// one per line ("rank 0 sends 2 elements to rank 1, which expects 3"); "" when all agree.
// by_rank[r] is rank r's fingerprint of the same all_to_all.
std::string all_to_all_mismatches(const std::vector<OpFingerprint>& by_rank);

// "4 float32 (16 bytes)"
std::string elements_text(int64_t count, DType dtype);

// "[0, 2]". A list of more than kRankListSpelledOut entries writes each run of three or more
// consecutive ranks as a range, "[0-47, 49-95]": jobs of a hundred ranks named every one of
// them in each stall line and Desync table row, hundreds of characters that nobody reads.
// The ranks stay in the order given, duplicates included (a run is a step of +1).
std::string rank_list_text(const std::vector<int>& ranks);

// What rank_list_text writes between its brackets: "0, 2", "0-47, 49-95" (DDP's messages
// name ranks without brackets).
std::string rank_items_text(const std::vector<int>& ranks);

// A list longer than this is written with ranges (rank_list_text) and its count (ranks_text).
constexpr size_t kRankListSpelledOut = 8;

// The subject of a sentence about some ranks: "rank 3", "ranks [0, 2]", and for a long
// list its count first, "95 ranks [0-47, 49-95]" (a range hides how many it holds). The
// count is of distinct ranks.
std::string ranks_text(const std::vector<int>& ranks);

// How a message names a rank of a group: "rank 1/2 group 'world/g0'". In a group whose ranks
// are not the world's, its world rank too, "rank 1/2 (world rank 3) group 'world/g0'": the
// number the launcher's [rank R] prefix and the job's other ranks know the process by.
// global_ranks[group rank] = world rank (BackendOptions' and ProcessGroupOptions'); empty:
// the same.
std::string group_rank_text(int rank, int size, const std::string& group_name, const std::vector<int>& global_ranks);

}  // namespace distcomm
