// What the core takes from the process's environment besides init_process_group's own
// variables (init.h): where plugins are, and the trace settings. Read at the edge, once
// (ProcessEnvironment::read(), in environment.cc, the one place under api/ that reads the
// environment), and passed down: init_process_group reads it and gives it to the world
// group (ProcessGroupOptions::environment); a program that makes its world group itself
// leaves that unset, and ProcessGroup::create, then its edge, reads it; subgroups inherit
// their parent's. The plugin loader, the flight recorder, the trace dumps and the timeline
// read none of it themselves.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "api/diagnostics/flight_recorder.h"

namespace distcomm {

// Where plugins are looked for, before the program's and libdistcomm.so's folders
// (plugin_registry.h).
struct PluginSearch {
  std::vector<std::string> plugin_path;     // DISTCOMM_PLUGIN_PATH, split at ':' (empty parts dropped)
  std::vector<std::string> runfiles_roots;  // $RUNFILES_DIR, $TEST_SRCDIR: Bazel runfiles

  static PluginSearch from_environment();
};

// The flight recorder's size, the trace dumps' folders and the timeline (flight_recorder.h,
// trace_dump.h, timeline.h).
struct TraceSettings {
  // DISTCOMM_TRACE_BUFFER: the ops each group keeps; 0 turns the recorder off.
  size_t buffer = FlightRecorder::kDefaultCapacity;
  // DISTCOMM_TRACE_DIR: where dumps go on failure, at exit and on SIGTERM; "" asks for none.
  std::string dump_dir;
  // Where SIGUSR1's dump goes without dump_dir: $TMPDIR/distcomm_trace, /tmp when unset.
  std::string default_dump_dir = "/tmp/distcomm_trace";
  // DISTCOMM_TIMELINE: the timeline's file; "" is off.
  std::string timeline_file;
  // DISTCOMM_RUN_ID: the run the timeline's file belongs to.
  std::string run_id;
  // RANK (the launcher's): the rank that names this process's dump; -1: unset, the world
  // rank of its first group then.
  int launcher_rank = -1;

  // Throws InvalidArgument for a DISTCOMM_TRACE_BUFFER that is not a count.
  static TraceSettings from_environment();
};

struct ProcessEnvironment {
  PluginSearch plugins;
  TraceSettings trace;
  // DISTCOMM_HOST_ID: a name for this rank's host. Ranks whose names differ never count as
  // sharing memory (auto_backend.h), whatever their kernel says: how tests and benchmarks
  // make several "hosts" of one machine, and how a user keeps shm off between containers
  // that share a kernel. "" (unset): the kernel's boot id and PID namespace alone decide.
  std::string host_id;

  static ProcessEnvironment read();
};

}  // namespace distcomm
