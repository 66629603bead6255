// Forgetting the keys (store_keys.h) of steps and generations that no live member can need
// any more. Every step writes gen/<g>/step/<s>/{done,verdict}, and every generation its
// arrivals and needs_state marks: kept, they grow the store's server (the launcher) by
// ~300 bytes a step for good (31 MB in a 15-minute soak). Each generation's lowest member
// deletes them (manager.cc says when, and why no member can still read them then).
//
// Best-effort: a store error ends a call quietly, and the next call starts where it stopped;
// no step ever fails for a deletion.
#pragma once

#include <cstdint>

#include "api/store/store.h"

namespace distcomm {
namespace ft {

// Deletes the done and verdict keys of steps [from, to) of generation g; returns the first
// step not deleted (`to` unless a store call failed).
uint64_t forget_steps(Store& store, uint64_t g, uint64_t from, uint64_t to) noexcept;

// Deletes the keys of the generations below `below` not forgotten yet (the store's
// forgotten_below says from where): their arrivals, needs_state marks and the steps of
// their last kTailSteps (the per-step deletion took the others). Their members record is
// kept (a few dozen bytes a generation: a joiner may read an older generation's list).
// Call it once every live member has left those.
void forget_generations(Store& store, uint64_t below) noexcept;

// How many of a generation's last steps forget_generations deletes: the per-step deletion
// leaves its last two, more where its store calls failed.
inline constexpr uint64_t kTailSteps = 64;

}  // namespace ft
}  // namespace distcomm
