// all_to_all for gloo groups, on gloo's unbound buffers: every pair of ranks exchanges one
// message each way, in a slot that carries the pair's byte count (gloo_slots.h). gloo's own
// alltoallv puts every pair in one slot, so a rank whose split disagrees with its peer's
// would send a longer message than the receive -- an abort on gloo's network thread -- or
// a shorter one. Here a disagreeing pair never meets: both ranks wait, and the stall watch
// names the splits (a Desync). A pair with nothing to send still exchanges a one-byte
// message (its slot says 0 bytes), so that a rank expecting data from it waits with it.
#include <cstring>
#include <vector>

#include <gloo/transport/unbound_buffer.h>

#include "backends/gloo/gloo_op.h"
#include "backends/gloo/gloo_slots.h"

namespace distcomm {
namespace gloo {

void run_all_to_all(CollectiveEnv& env, GlooOp& op) {
  const auto& context = env.context;
  const int size = context->size;
  const int rank = context->rank;
  const size_t element = element_size(op.out.dtype());
  auto* input = static_cast<uint8_t*>(op.in.data());
  auto* output = static_cast<uint8_t*>(op.out.data());
  std::vector<size_t> in_at(static_cast<size_t>(size) + 1, 0), out_at(static_cast<size_t>(size) + 1, 0);
  for (int r = 0; r < size; ++r) {
    in_at[r + 1] = in_at[r] + static_cast<size_t>(op.in_counts[r]) * element;
    out_at[r + 1] = out_at[r] + static_cast<size_t>(op.out_counts[r]) * element;
  }
  // This rank's own block (the ProcessGroup checked that both splits agree on it).
  if (out_at[rank + 1] > out_at[rank]) {
    std::memmove(output + out_at[rank], input + in_at[rank], out_at[rank + 1] - out_at[rank]);
  }
  if (size == 1) return;
  // Two bytes of scratch for the empty pairs' messages: one sent, one received into.
  auto* empty = static_cast<uint8_t*>(env.scratch.get(2));
  empty[0] = 0;
  auto in_buf = context->createUnboundBuffer(input, in_at[size]);
  auto out_buf = context->createUnboundBuffer(output, out_at[size]);
  auto empty_send = context->createUnboundBuffer(empty, 1);
  auto empty_recv = context->createUnboundBuffer(empty + 1, 1);
  const DType dtype = op.out.dtype();
  int sends = 0, recvs = 0, empty_sends = 0, empty_recvs = 0;
  for (int i = 1; i < size; ++i) {
    const int to = (rank + i) % size;
    const int from = (rank - i + size) % size;
    const size_t out_bytes = out_at[from + 1] - out_at[from];
    const size_t in_bytes = in_at[to + 1] - in_at[to];
    if (out_bytes > 0) {
      out_buf->recv(from, sized_slot(kAllToAllSlotPrefix, op.tag, out_bytes, dtype), out_at[from], out_bytes);
      ++recvs;
    } else {
      empty_recv->recv(from, sized_slot(kAllToAllSlotPrefix, op.tag, 0, dtype), 0, 1);
      ++empty_recvs;
    }
    if (in_bytes > 0) {
      in_buf->send(to, sized_slot(kAllToAllSlotPrefix, op.tag, in_bytes, dtype), in_at[to], in_bytes);
      ++sends;
    } else {
      empty_send->send(to, sized_slot(kAllToAllSlotPrefix, op.tag, 0, dtype), 0, 1);
      ++empty_sends;
    }
  }
  for (int i = 0; i < recvs; ++i) out_buf->waitRecv(op.wait_limit);
  for (int i = 0; i < empty_recvs; ++i) empty_recv->waitRecv(op.wait_limit);
  for (int i = 0; i < sends; ++i) in_buf->waitSend(op.wait_limit);
  for (int i = 0; i < empty_sends; ++i) empty_send->waitSend(op.wait_limit);
}

}  // namespace gloo
}  // namespace distcomm
