// gloo slot prefixes for the transfers distcomm posts itself. gloo's collectives use
// prefixes 0x01-0x08 (gloo/types.h); these stay clear of them, so a p2p message or a
// reduce_scatter block can never be taken for part of a gloo collective.
#pragma once

#include <cstdint>

namespace distcomm {
namespace gloo_backend {

constexpr uint8_t kReduceScatterSlotPrefix = 0x41;
constexpr uint8_t kPointToPointSlotPrefix = 0x42;
// GlooComm::interrupt posts a receive nobody sends to (see there).
constexpr uint8_t kInterruptSlotPrefix = 0x43;

}  // namespace gloo_backend
}  // namespace distcomm
