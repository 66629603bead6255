// The MPI tag of a point-to-point message: the user's tag with the sender's dtype in its
// low bits.
//
// MPI matches a message by source and tag and checks only that it fits: a float32[4] sent
// into an int32[4] recv (the same 16 bytes) arrives as success with the bytes
// reinterpreted. With the dtype in the tag, a recv that probes its source with
// MPI_ANY_TAG (probed_messages.h) sees the next message of its own tag whatever the
// sender's dtype, and refuses one of another dtype naming both (mpi_op.h) -- at no cost to
// a transfer that matches: the same one probe and one receive as before.
//
// The user's tags are therefore 0 .. MPI_TAG_UB >> kDTypeTagBits: 134217727 with Open MPI's
// ob1 (MPI_TAG_UB 2^31 - 1), 524287 with its UCX layer (2^23 - 1), 2047 where MPI gives only
// the 32767 it guarantees. A tag beyond is refused before anything is sent.
#pragma once

#include "api/dtype.h"

namespace distcomm {
namespace mpi {

constexpr int kDTypeTagBits = 4;
// The last code, 15, is no dtype's: it marks a split send's header (p2p_split.h).
static_assert(kNumDTypes < (1 << kDTypeTagBits), "every dtype's code must fit in the tag's low bits");

inline int wire_tag(int tag, DType dtype) { return (tag << kDTypeTagBits) | static_cast<int>(dtype); }
inline int user_tag(int wire_tag) { return wire_tag >> kDTypeTagBits; }
// The sender's dtype; false for a code no dtype has.
inline bool sent_dtype(int wire_tag, DType* dtype) {
  const int code = wire_tag & ((1 << kDTypeTagBits) - 1);
  if (code >= kNumDTypes) return false;
  *dtype = static_cast<DType>(code);
  return true;
}
// The largest user tag, given MPI's MPI_TAG_UB.
inline int max_user_tag(int tag_upper_bound) { return tag_upper_bound >> kDTypeTagBits; }

}  // namespace mpi
}  // namespace distcomm
