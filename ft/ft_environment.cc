#include "ft/ft_environment.h"

#include <cstdlib>

#include "api/errors.h"
#include "api/init.h"
#include "api/process/rank_environment.h"

namespace distcomm {
namespace ft {
namespace {

std::string variable(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::chrono::milliseconds parse_heartbeat_timeout(const std::string& v) {
  if (v.find_first_not_of("0123456789") != std::string::npos || v.size() > 9 || std::stol(v) == 0) {
    throw InvalidArgument("DISTCOMM_FT_HEARTBEAT_TIMEOUT_MS='" + v + "': expected a positive number of milliseconds");
  }
  return std::chrono::milliseconds(std::stol(v));
}

}  // namespace

FtEnvironment FtEnvironment::read() {
  FtEnvironment env;
  env.member_id = variable(local::kFtMemberIdVariable);
  env.join = variable(local::kFtJoinVariable);
  env.heartbeat_timeout_ms = variable("DISTCOMM_FT_HEARTBEAT_TIMEOUT_MS");
  env.backend = backend_from_environment();  // the core's reading (api/init.h), as init's
  return env;
}

void resolve_options(ManagerOptions& options, const FtEnvironment& env) {
  if (!options.joining) options.joining = env.join == "1";
  if (options.member_id.empty()) options.member_id = env.member_id;
  if (options.backend.empty()) options.backend = env.backend.empty() ? "auto" : env.backend;
  if (options.heartbeat_timeout > std::chrono::milliseconds::zero()) return;
  if (env.heartbeat_timeout_ms.empty()) {
    options.heartbeat_timeout = std::chrono::seconds(3);
    return;
  }
  options.heartbeat_timeout = parse_heartbeat_timeout(env.heartbeat_timeout_ms);
  if (options.heartbeat_interval > std::chrono::milliseconds::zero() &&
      options.heartbeat_interval * 2 > options.heartbeat_timeout) {
    // Said in the terms the user set: the interval is the program's, the variable theirs.
    throw InvalidArgument("DISTCOMM_FT_HEARTBEAT_TIMEOUT_MS=" + std::to_string(options.heartbeat_timeout.count()) +
                          ": expected at least " + std::to_string(2 * options.heartbeat_interval.count()) +
                          " ms, twice the heartbeat's interval (ManagerOptions::heartbeat_interval, " +
                          std::to_string(options.heartbeat_interval.count()) +
                          " ms): a member must be able to miss a beat before it is taken for gone");
  }
}

}  // namespace ft
}  // namespace distcomm
