// copy_fingerprint: `to = from` for the per-op records (the stall watch's ring, the flight
// recorder's slots), without the two vector assignments where both sides' splits are empty
// (every op but all_to_all): each is an out-of-line call, ~45 of an op's instructions.
// The core's own (not in PUBLIC_HEADERS): a plugin copies fingerprints with operator=.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "api/diagnostics/op_fingerprint.h"

namespace distcomm {
namespace internal {

// OpFingerprint's members as copy_fingerprint copies them, in order: a member added to
// OpFingerprint (op_fingerprint.h) changes its size or the offset of the splits and stops
// the build here, until it is copied below too.
struct OpFingerprintFieldsCopied {
  OpType op;
  uint64_t seq;
  bool p2p, internal, has_tensor;
  DType dtype;
  int64_t count;
  uint8_t ndim;
  int64_t dims[OpFingerprint::kMaxDims];
  int32_t root, tag;
  int64_t ordinal;
  bool has_reduction;
  ReduceOp reduction;
  std::vector<int64_t> send_counts, recv_counts;
};
static_assert(sizeof(OpFingerprint) == sizeof(OpFingerprintFieldsCopied), "copy_fingerprint misses a member");
static_assert(offsetof(OpFingerprint, reduction) == offsetof(OpFingerprintFieldsCopied, reduction) &&
                  offsetof(OpFingerprint, send_counts) == offsetof(OpFingerprintFieldsCopied, send_counts),
              "copy_fingerprint misses a member");

inline void copy_fingerprint(OpFingerprint& to, const OpFingerprint& from) {
  to.op = from.op;
  to.seq = from.seq;
  to.p2p = from.p2p;
  to.internal = from.internal;
  to.has_tensor = from.has_tensor;
  to.dtype = from.dtype;
  to.count = from.count;
  to.ndim = from.ndim;
  std::copy(from.dims, from.dims + OpFingerprint::kMaxDims, to.dims);
  to.root = from.root;
  to.tag = from.tag;
  to.ordinal = from.ordinal;
  to.has_reduction = from.has_reduction;
  to.reduction = from.reduction;
  // Assignment keeps `to`'s capacity; skipped where both are empty (it would change nothing).
  if (!from.send_counts.empty() || !to.send_counts.empty()) to.send_counts = from.send_counts;
  if (!from.recv_counts.empty() || !to.recv_counts.empty()) to.recv_counts = from.recv_counts;
}

}  // namespace internal
}  // namespace distcomm
