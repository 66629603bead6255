// Trace dumps: this process's flight recorders (every group's last ops) as one JSON file,
// <dir>/rank_<R>.json, for `tools/trace analyze` to merge with the other ranks'.
//
// Written, into DISTCOMM_TRACE_DIR,
//   - when an op fails with Timeout, PeerFailure or Desync (once per group), before the
//     op's wait() throws;
//   - at exit;
//   - on SIGUSR1 (a user, or tools/launch with --trace_dir, asks a hung job): the handler
//     only writes the signal's number to a pipe; a thread of this process writes the dump,
//     and the program goes on. This one also without DISTCOMM_TRACE_DIR, into
//     $TMPDIR/distcomm_trace (/tmp when TMPDIR is unset).
//   - on SIGTERM, with DISTCOMM_TRACE_DIR set (any launcher's stop: Slurm, mpirun,
//     Kubernetes, tools/launch): the same pipe and thread write the dump (at most 5 s; not
//     again when it would repeat the last dump word for word, as after tools/launch's
//     SIGUSR1); with DISTCOMM_TIMELINE set too, or alone, they append the timeline's events
//     (on SIGUSR1 as well); then the process ends as SIGTERM's default action ends it (its exit status
//     says "terminated"). A second SIGTERM ends it at once; so does SIGTERM in a fork child
//     that has no dump thread. SIGINT (tools/launch passes a Ctrl-C on as SIGINT) is handled
//     the same way, and ends the process as SIGINT would.
//   Both handlers are installed only over the default action, when the first group is
//   made: a program that handles (or ignores) SIGUSR1 or SIGTERM itself keeps its handler,
//   whether it installed it before or after, and gets no dump from that signal (it can call
//   write_trace_dump from its own thread).
// Each dump says where it went on stderr, in one line. A later
// dump replaces an earlier one of the same rank (it holds more). The file is written
// under another name, its own for each write, and renamed, so a reader never sees half a
// dump; one process's dumps (a failure's, a signal's, the exit's) are written one at a time.
//
// Format (version 1): {"format": "distcomm-trace-dump", "version": 1, "rank", "run_id"
// (DISTCOMM_RUN_ID, TraceSettings::run_id; "" without one), "host",
// "pid", "reason", "time_ns", "distcomm_abi", "groups": [{"name", "rank", "size",
// "global_ranks", "backend", "versions", "capacity", "dropped", "ops": [{"id", "op",
// "seq", "kind" (collective / p2p / internal), "state", "queued_ns", "started_ns",
// "ended_ns", "dtype", "count", "shape", "root", "peer", "tag", "reduce_op", "describe",
// "fingerprint" (OpFingerprint::encode), "error"}]}]}.
#pragma once

#include <memory>
#include <string>

#include "api/diagnostics/flight_recorder.h"
#include "api/group/process_environment.h"

namespace distcomm {

constexpr char kTraceDirVariable[] = "DISTCOMM_TRACE_DIR";
constexpr char kTraceBufferVariable[] = "DISTCOMM_TRACE_BUFFER";

// Adds a group's recorder to this process's dumps, and on the first call sets up the
// signal thread (SIGUSR1, SIGTERM) and the exit dump. With DISTCOMM_TRACE_DIR set the recorder is kept
// after its group is gone (a few dozen at most), so that the exit dump still has it.
// settings: the group's TraceSettings (process_environment.h); the last group's are the
// ones every dump uses from then on.
void register_for_dumps(const std::shared_ptr<FlightRecorder>& recorder, const TraceSettings& settings);

// This process's dump, as text.
std::string trace_dump_json(const std::string& reason);

// Writes the dump into DISTCOMM_TRACE_DIR (or the default folder) and returns its path;
// throws Error when the file cannot be written.
std::string write_trace_dump(const std::string& reason);

}  // namespace distcomm
