// Receives that have refused their message and are draining it: not a stall.
//
// A backend that refuses a recv of another size or dtype than its message may still have
// to consume the whole message before that recv ends (shm: the rest of a message larger
// than its ring must come out for the sender's send to complete and the pair's stream to go
// on). The recv then fails with InvalidArgument on its own, the sender cannot tell, and the
// group stays usable (docs/shm.md). While it drains, the recv is unfinished and smaller than
// the send still pending on the peer: the stall watch, comparing reports after probe_after,
// took that for a size mismatch it had to end and failed the whole group (a 4 MiB refusal
// drained on a loaded host). A backend marks such a recv; the watch still reports it (so
// that the peer's send stays paired with it and is not offered to another recv of this rank
// from any source), marked, and gives no verdict on it (its own deadline still holds).
#pragma once

#include "api/work.h"

// Marks `work` as a recv draining the message it refused, until it ends (ABI minor 10). A
// core entry point declared weak, so that a plugin that calls it still loads in an older
// core (whose watch then counts it as before).
extern "C" void distcomm_refusal_draining(distcomm::Work* work) __attribute__((weak));

namespace distcomm {

// For backends: what distcomm_refusal_draining does, where the core has it. (The watch's
// side, refusal_draining(), is core only: work_marks.h.)
inline void note_refusal_draining(Work& work) {
  if (distcomm_refusal_draining) distcomm_refusal_draining(&work);
}

}  // namespace distcomm
