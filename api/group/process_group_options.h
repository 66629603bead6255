// What a ProcessGroup is made of (ProcessGroup::create, init_process_group, new_group).
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "api/debug_level.h"
#include "api/group/init_wait.h"
#include "api/group/process_environment.h"
#include "api/store/store.h"
#include "api/timeouts.h"

namespace distcomm {

struct ProcessGroupOptions {
  // The world's store, reached by every rank; the group works under its own prefix. Null
  // only for backends that find their peers by themselves (needs_store() is false, MPI):
  // their backends then get no store, and the group exchanges host messages through its
  // own collectives.
  StorePtr store;
  int rank = 0;
  int size = 1;
  std::string backend = "gloo";  // a BackendSpec
  std::chrono::milliseconds timeout = kDefaultGroupTimeout;
  std::string group_name = "world";
  std::vector<int> global_ranks;  // empty for the world group: 0..size-1
  // Settings of the group's backends (each plugin declares its keys, plugin.h); a key no
  // backend of the group declares is refused when the group is created.
  std::map<std::string, std::string> backend_config;
  // Where plugins are, and the trace settings (process_environment.h): init_process_group
  // sets them from its one read of the environment; unset, ProcessGroup::create (then the
  // program's edge) reads them. Subgroups inherit them.
  std::optional<ProcessEnvironment> environment;
  // What the group checks and logs beyond its default (debug_level.h); subgroups inherit it.
  DebugLevel debug = DebugLevel::kOff;
  // The deadline of the group's creation (init_wait.h): init_process_group sets it from its
  // own start, so that connecting to the store counts; unset (the default), creation counts
  // from its own start. Every phase of creation waits within it.
  std::chrono::steady_clock::time_point creation_deadline{};
  // What creation_deadline was made of, for messages ("the group's timeout is 5.0 s"):
  // shrink's own timeout, or the enclosing creation's for a hierarchy's levels. Zero: timeout.
  std::chrono::milliseconds creation_timeout{0};
  // How often a rank waiting at creation says whom it waits for.
  std::chrono::milliseconds creation_report_every = kDefaultInitReportInterval;
  // Where the store is, for messages ("tcp://10.0.0.1:29500").
  std::string store_text = "the group's store";
  // The process that serves the store ("rank 0": init_process_group's TCPStore; "the
  // launcher" when tools/launch or spawn() serves it, DISTCOMM_STORE_SERVED_BY), for when
  // the store goes away under the group's creation or its host exchange: a PeerFailure
  // saying "rank 0 (which served the store) has exited or closed it" rather than the
  // store's error. Empty when no process of the job serves it (a FileStore, the program's
  // own); subgroups inherit it.
  std::string store_host;
};

}  // namespace distcomm
