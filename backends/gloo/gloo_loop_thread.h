// gloo's network thread: the one thread per TCP device that reads every connection of the
// group (and finishes the writes a caller could not), in gloo's Loop. The plugin does not
// create it, so it names and schedules it from inside: it registers an eventfd on the
// device's loop, and the handler, which gloo runs on that thread, sets the thread up.
//
// Why it is SCHED_BATCH by default ("loop_sched"): gloo's caller (the thread running the op)
// writes a message into a socket while holding that connection's lock; the peer's bytes
// that arrive meanwhile wake the network thread, often on the caller's own core, where it
// preempts the caller. Finding the lock held, it returns to a level-triggered epoll_wait
// that returns at once, and spins until the tick takes the core back: 3-4 ms of a 1 MiB
// all_reduce that otherwise takes 1 ms (docs/performance.md). A SCHED_BATCH thread does not
// preempt the thread it wakes beside; it runs when that thread blocks (the caller soon waits
// for the bytes it reads), on an idle core, or at the tick. Its share of the CPU is
// unchanged, so a busy host does not starve it. Real-time priority hid the problem: the
// callers then preempt the network thread, never the reverse.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>

#include <gloo/transport/device.h>

#include "backends/gloo/gloo_config.h"

namespace distcomm {
namespace gloo {

// Names the device's network thread "dc-gloo-loop" and applies `scheduling` to it
// (set_up_thread). Returns its thread id, or 0 when the device is not gloo's TCP one or its
// thread did not answer within `deadline` (then it is left as it was: best effort, the
// group works either way).
pid_t set_up_loop_thread(::gloo::transport::Device& device, ThreadScheduling scheduling,
                         std::chrono::milliseconds deadline);

}  // namespace gloo
}  // namespace distcomm
