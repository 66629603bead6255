// ft's environment, read in one place: the edge of ft, as api/group/environment.cc is the
// core's. ft::Manager's constructor calls FtEnvironment::read() once and resolves its
// options from what it read (resolve_options); nothing else under ft/ reads the
// environment (tests/ft:ft_environment_edge_test fails when another file does). The core's
// variables that ft needs come through the core's own readers (api/init.h:
// read_launch_env, identity_from_environment, init_report_interval_from_environment,
// backend_from_environment, store_served_by_launcher_from_environment), so that ft reads and
// checks each of them as init_process_group does: a value init refuses, ft refuses in the
// same words (ft read DISTCOMM_STORE_SERVED_BY itself, and a mistyped one meant "rank 0
// serves the store" here where init refused it).
#pragma once

#include <string>

#include "ft/manager.h"

namespace distcomm {
namespace ft {

// The variables as text, each parsed where it is used, so that one an explicit
// ManagerOptions field overrides is never parsed (and cannot fail).
struct FtEnvironment {
  std::string member_id;             // DISTCOMM_FT_MEMBER_ID
  std::string join;                  // DISTCOMM_FT_JOIN: "1" for a joiner
  std::string heartbeat_timeout_ms;  // DISTCOMM_FT_HEARTBEAT_TIMEOUT_MS
  std::string backend;               // DISTCOMM_BACKEND, through the core's backend_from_environment()

  static FtEnvironment read();
};

// What `options` left unset, taken from `env` (ManagerOptions says which field comes from
// which variable): joining, heartbeat_timeout (3 s when neither gives one), backend ("auto"
// when neither does) and member_id (left "" when neither gives one: the Manager names it
// after the rank or the process). Throws InvalidArgument for a malformed
// DISTCOMM_FT_HEARTBEAT_TIMEOUT_MS, or one below twice heartbeat_interval, naming the
// variable (the user's setting, not the program's).
void resolve_options(ManagerOptions& options, const FtEnvironment& env);

}  // namespace ft
}  // namespace distcomm
