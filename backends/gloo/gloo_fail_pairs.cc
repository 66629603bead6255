#include "backends/gloo/gloo_fail_pairs.h"

#include <chrono>
#include <exception>

#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include "backends/gloo/gloo_slots.h"

namespace distcomm {
namespace gloo {

void fail_every_pair(::gloo::transport::Context& context, const std::vector<int>& order) {
  char unused = 0;
  for (int peer : order) {
    auto buffer = context.createUnboundBuffer(&unused, 1);
    try {
      buffer->recv(peer, ::gloo::Slot::build(kNeverSentSlotPrefix, 0), 0, 1);
    } catch (const std::exception&) {
      continue;  // this pair has failed already; another one may not have
    }
    try {
      buffer->waitRecv(nullptr, std::chrono::milliseconds(1));
    } catch (const std::exception&) {
      // The timeout that signalled every pair: done.
    }
    return;
  }
}

}  // namespace gloo
}  // namespace distcomm
