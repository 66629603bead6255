// ft's edge (ft/ft_environment.h): the options an ft::Manager resolves from its variables,
// from made-up values (nothing here sets the process's environment).
#include <gtest/gtest.h>

#include <string>

#include "api/errors.h"
#include "ft/ft_environment.h"

namespace distcomm {
namespace {

using std::chrono::milliseconds;

std::string refusal(ft::ManagerOptions options, const ft::FtEnvironment& env) {
  try {
    ft::resolve_options(options, env);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "accepted";
}

TEST(FtEnvironment, UnsetOptionsComeFromTheVariables) {
  ft::FtEnvironment env;
  env.member_id = "rank2+1";
  env.join = "1";
  env.heartbeat_timeout_ms = "750";
  env.backend = "gloo";
  ft::ManagerOptions o;
  ft::resolve_options(o, env);
  EXPECT_EQ(o.member_id, "rank2+1");
  EXPECT_EQ(o.joining, std::optional<bool>(true));
  EXPECT_EQ(o.heartbeat_timeout, milliseconds(750));
  EXPECT_EQ(o.backend, "gloo");
}

TEST(FtEnvironment, OptionsTheProgramSetWinAndLeaveTheVariablesUnparsed) {
  ft::FtEnvironment env;
  env.member_id = "from-env";
  env.join = "1";
  env.heartbeat_timeout_ms = "soon";  // never parsed: the program set the timeout
  env.backend = "gloo";
  ft::ManagerOptions o;
  o.member_id = "mine";
  o.joining = false;
  o.heartbeat_timeout = milliseconds(900);
  o.backend = "shm";
  ft::resolve_options(o, env);
  EXPECT_EQ(o.member_id, "mine");
  EXPECT_EQ(o.joining, std::optional<bool>(false));
  EXPECT_EQ(o.heartbeat_timeout, milliseconds(900));
  EXPECT_EQ(o.backend, "shm");
}

TEST(FtEnvironment, NeitherGivesTheDefaults) {
  ft::ManagerOptions o;
  ft::resolve_options(o, ft::FtEnvironment{});
  EXPECT_EQ(o.member_id, "");  // the Manager names it after its rank or its process
  EXPECT_EQ(o.joining, std::optional<bool>(false));
  EXPECT_EQ(o.heartbeat_timeout, std::chrono::seconds(3));
  EXPECT_EQ(o.backend, "auto");
}

TEST(FtEnvironment, AMalformedOrTooShortHeartbeatTimeoutIsRefusedNamingTheVariable) {
  ft::FtEnvironment env;
  env.heartbeat_timeout_ms = "3s";
  EXPECT_EQ(refusal({}, env), "DISTCOMM_FT_HEARTBEAT_TIMEOUT_MS='3s': expected a positive number of milliseconds");
  env.heartbeat_timeout_ms = "0";
  EXPECT_EQ(refusal({}, env), "DISTCOMM_FT_HEARTBEAT_TIMEOUT_MS='0': expected a positive number of milliseconds");
  env.heartbeat_timeout_ms = "150";  // the default interval is 100 ms
  EXPECT_EQ(refusal({}, env),
            "DISTCOMM_FT_HEARTBEAT_TIMEOUT_MS=150: expected at least 200 ms, twice the heartbeat's interval "
            "(ManagerOptions::heartbeat_interval, 100 ms): a member must be able to miss a beat before it is taken "
            "for gone");
}

}  // namespace
}  // namespace distcomm
