// The process's environment, read in one place. Every variable the core reads is read in
// environment.cc -- init_process_group's (below) and the group's (process_environment.h) --
// except DISTCOMM_ERROR_FILE, which run_main.cc reads as the program's main ends (the
// program's own edge). init_process_group calls InitEnvironment::read() once and passes what
// it needs down; nothing below it reads the environment. tests/api:environment_edge_test
// fails when another file under api/ calls getenv.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "api/init.h"
#include "api/plugin/plugin_registry.h"
#include "api/group/process_environment.h"

namespace distcomm {

// init_process_group's variables, as text: each is parsed where init uses it, so that one an
// explicit InitOptions field overrides is not parsed at all (and cannot fail).
struct InitEnvironment {
  LaunchEnv launch;                 // read_launch_env(): malformed numbers throw here
  std::string backend;              // DISTCOMM_BACKEND
  JobIdentity identity;             // DISTCOMM_RUN_ID, DISTCOMM_STORE_TOKEN
  std::string store_bind;           // DISTCOMM_STORE_BIND
  std::string store_served_by;      // DISTCOMM_STORE_SERVED_BY (api/process/rank_environment.h)
  std::string debug;                // DISTCOMM_DEBUG
  std::string init_report_seconds;  // DISTCOMM_INIT_REPORT_SECONDS
  ProcessEnvironment process;       // the plugin path and the trace variables

  static InitEnvironment read();
};

// The variables a launcher (LaunchEnv::source: "torchrun", "mpirun", ...) sets for the rank
// and the world size, for messages ("RANK", "WORLD_SIZE"); for "" torchrun's. world_size is
// empty for a launcher that sets no variable for it (PMIx: the size is PMIx's to ask).
struct LaunchVariables {
  std::string rank;
  std::string world_size;
};
LaunchVariables launch_variables(const std::string& source);

// A report interval's variable: a positive number of seconds, fractions allowed; "" is
// `otherwise`. Throws InvalidArgument naming `variable`.
std::chrono::milliseconds parse_report_seconds(const char* variable, const std::string& text,
                                               std::chrono::milliseconds otherwise);
// DISTCOMM_INIT_REPORT_SECONDS's text ("" is kDefaultInitReportInterval). Read and parsed in
// one for the programs' own waits: init_report_interval_from_environment() (init.h, public,
// since ft/ sees only the public headers).
std::chrono::milliseconds parse_init_report_seconds(const std::string& text);
// DISTCOMM_STALL_REPORT_SECONDS, read now ("" or unset: `otherwise`): the stall watch's
// report interval (api/diagnostics/stall_watch.h), which it reads when a group makes it.
std::chrono::milliseconds stall_report_interval(std::chrono::milliseconds otherwise);

// A store's port as text, wherever it comes from (MASTER_PORT, init_method's
// tcp://host:port): 1-65535, or 0 for rank 0's store to pick a free one. Checked before
// anything connects: the socket calls would take a larger number modulo 65536 and listen
// on another port than the one the other ranks were given. Throws InvalidArgument naming
// `what` and the text.
int parse_port(const std::string& what, const std::string& text);

// DISTCOMM_STORE_SERVED_BY's text: "launcher" is true (the launcher serves the store), ""
// false (rank 0 does). Throws InvalidArgument naming the variable for anything else.
bool parse_store_served_by_launcher(const std::string& text);

// The values of the variables that `keys` name (ConfigKey::env), by key name; unset and
// empty ones are left out.
std::map<std::string, std::string> config_from_environment(const std::vector<ConfigKey>& keys);

}  // namespace distcomm
