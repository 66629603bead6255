// Timeline: every op of every group, and what DDP does with its buckets, as Chrome trace
// events (chrome://tracing, Perfetto; `tools/trace timeline FILE --svg OUT` draws it).
//
// With DISTCOMM_TIMELINE=FILE every rank keeps its events in memory and appends them to
// FILE when it exits (and on the way, every 20,000 events: timeline.cc), under an exclusive lock
// on the file, so the ranks of a job -- on one machine or sharing a file system -- merge
// into one document that is valid JSON after every append:
//   {"otherData": {"run_id": ...}, "traceEvents": [ ...events... ]}
// A file written by another run (another DISTCOMM_RUN_ID; tools/launch gives every job
// one) is replaced, not appended to.
// An append that fails part way (a full disk) or is cut short (SIGKILL) loses only its own
// events: the events go after the old tail first, and the old tail becomes a comma after.
// A file that is neither (not JSON any more: a writer of an older version stopped part way)
// is kept, renamed FILE.damaged.<time>.<pid> with a warning, never truncated.
//
// One process per rank (pid = world rank, named "rank R"), one thread per lane: a group's
// name for its ops, "ddp <group>" for DDP's buckets. Ops are complete events ("X") from
// start to end (flight_recorder.h's states) with args bytes, dtype, count, seq, state and
// the time queued before starting. DDP: "bucket I ready" (instant: its last gradient is
// ready), "bucket I all_reduce" (async span: launched to finished; buckets overlap while
// queued), "bucket I waited" (complete: finish_backward waiting for it).
#pragma once

#include <cstdint>
#include <string>

namespace distcomm {

constexpr char kTimelineVariable[] = "DISTCOMM_TIMELINE";

// The file (DISTCOMM_TIMELINE) and the run it belongs to (DISTCOMM_RUN_ID), as the first
// group of the process read them (TraceSettings, process_environment.h): the first call
// decides, as the variable was read once per process. "" leaves the timeline off.
void timeline_configure(const std::string& file, const std::string& run_id);
// Whether timeline_configure named a file.
bool timeline_enabled();
// Now, as the events' times are: wall-clock nanoseconds (the flight recorder's clock).
int64_t timeline_now_ns();

// args: the members of a JSON object ("\"bytes\":8,\"seq\":3"), or "". Times are
// timeline_now_ns()'s. No-ops when the timeline is off.
void timeline_complete(int rank, const std::string& lane, const std::string& name, int64_t start_ns,
                       int64_t end_ns, const std::string& args = "");
void timeline_instant(int rank, const std::string& lane, const std::string& name, int64_t at_ns,
                      const std::string& args = "");
// A span that may overlap others of its lane (DDP's bucket reductions, queued behind one
// another): an async pair ("b" / "e", category "distcomm", an id of its own).
void timeline_async_span(int rank, const std::string& lane, const std::string& name, int64_t start_ns,
                         int64_t end_ns, const std::string& args = "");

// Appends the events held so far to the file and forgets them (done by itself at exit, and
// on SIGTERM and SIGUSR1: trace_dump.h).
// Throws Error when the file cannot be written.
void timeline_flush();

}  // namespace distcomm
