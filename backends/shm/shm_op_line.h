// What collective a rank runs now, in its segment, for the peers that find it disagrees.
//
// A round's mark (shm_rounds.h) is only a hash: enough to refuse a peer's data, not to say
// what differs. So each rank also writes the fingerprint of the collective it starts into
// its segment's op line (plain stores into its own line, a few nanoseconds per op), before
// the op's first post. A rank whose read finds another mark builds the Desync's table --
// "rank 0: all_reduce #1 float32[10] sum / ranks [1, 2]: all_reduce #1 float32[20] sum" --
// from the op lines of the peers that reached that round, at once and without the store.
// A peer cannot move past the op whose round disagrees (an op's last round waits for every
// peer's equal mark), so the line it holds is that op's.
#pragma once

#include <cstdint>

#include "api/diagnostics/op_fingerprint.h"

namespace distcomm {
namespace shm {

// The collective fields of an OpFingerprint (all_to_all's splits, which may differ between
// ranks, are not in it), as plain data a peer can read.
struct OpDescription {
  uint64_t seq;
  int64_t count;
  int64_t dims[OpFingerprint::kMaxDims];
  double factor;  // PREMUL_SUM's
  int32_t root;
  uint32_t op;      // OpType
  uint32_t dtype;   // DType
  uint8_t reduction;  // ReduceOp::Kind
  uint8_t ndim;
  uint8_t has_tensor;
  uint8_t has_reduction;
  uint8_t internal;
};

OpDescription describe_op(const OpFingerprint& f);
OpFingerprint fingerprint_of(const OpDescription& d);

}  // namespace shm
}  // namespace distcomm
