// reduce_scatter for gloo groups. gloo 0.5 has no reduce_scatter in its option-style API
// (only a class for power-of-two halving/doubling), so this is a ring written on gloo's
// unbound buffers: P-1 steps; at step s rank r sends its partial sum of block r-s-1 to
// rank r+1 and folds the partial sum of block r-s-2 from rank r-1 into its own input, so
// that after the last step it holds the full reduction of block r. Each rank sends
// (P-1)/P of its input, the minimum for reduce_scatter. The input is only read.
#include <cstring>

#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include "backends/gloo/gloo_op.h"
#include "backends/gloo/gloo_reduction.h"
#include "backends/gloo/gloo_slots.h"

namespace distcomm {
namespace gloo {

void run_reduce_scatter(CollectiveEnv& env, GlooOp& op) {
  const auto& context = env.context;
  const int size = context->size;
  const int rank = context->rank;
  const size_t count = static_cast<size_t>(op.out.numel());
  const size_t bytes = op.out.nbytes();
  const auto* input = static_cast<const uint8_t*>(op.in.data());
  auto* output = static_cast<uint8_t*>(op.out.data());
  auto block = [&](int b) { return input + static_cast<size_t>(b) * bytes; };
  if (count == 0) return;
  if (size == 1) {
    if (output != input) std::memmove(output, input, bytes);
    return;
  }
  const ReduceFn reduce = reduce_function(op.out.dtype(), op.reduce);
  // Two blocks of scratch: one being sent on while the next arrives in the other.
  auto* scratch = static_cast<uint8_t*>(env.scratch.get(2 * bytes));
  auto scratch_buf = context->createUnboundBuffer(scratch, 2 * bytes);
  // gloo only reads from a buffer that sends.
  auto input_buf = context->createUnboundBuffer(const_cast<uint8_t*>(input), static_cast<size_t>(size) * bytes);
  const uint64_t slot = ::gloo::Slot::build(kReduceScatterSlotPrefix, op.tag);
  const int right = (rank + 1) % size;
  const int left = (rank + size - 1) % size;

  for (int step = 0; step < size - 1; ++step) {
    const int send_block = (rank - step - 1 + 2 * size) % size;
    const int recv_block = (rank - step - 2 + 2 * size) % size;
    const size_t recv_offset = static_cast<size_t>(step & 1) * bytes;
    scratch_buf->recv(left, slot, recv_offset, bytes);
    // Step 0 sends a block of the input as it is; later steps the partial sum just made.
    auto& sender = step == 0 ? input_buf : scratch_buf;
    const size_t send_offset = step == 0 ? static_cast<size_t>(send_block) * bytes
                                         : static_cast<size_t>((step - 1) & 1) * bytes;
    sender->send(right, slot, send_offset, bytes);
    scratch_buf->waitRecv(op.wait_limit);
    // The last block to arrive is this rank's own (recv_block == rank): finish it in output.
    uint8_t* into = step == size - 2 ? output : scratch + recv_offset;
    reduce(into, scratch + recv_offset, block(recv_block), count);
    // The next step receives into the half this step sent from.
    sender->waitSend(op.wait_limit);
  }
}

}  // namespace gloo
}  // namespace distcomm
