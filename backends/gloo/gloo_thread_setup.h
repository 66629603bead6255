// Naming and scheduling the threads the gloo plugin runs or adopts (its worker, gloo's
// network thread), so that ps -L, perf and gdb show them by name and config can place them.
#pragma once

#include <pthread.h>

#include "backends/gloo/gloo_config.h"

namespace distcomm {
namespace gloo {

// Names `thread` (at most 15 characters) and, for kBatch, moves it from SCHED_OTHER to
// SCHED_BATCH, keeping its nice value. A thread the program runs with another policy
// (a real-time one, inherited from the thread that created it) keeps that policy. Best
// effort: a refusal leaves the thread as it was.
void set_up_thread(pthread_t thread, const char* name, ThreadScheduling scheduling);

}  // namespace gloo
}  // namespace distcomm
