// ft::Manager's variables as the process's environment sets them (ft_environment_test gives
// made-up values instead). The core's variables that ft needs are read and checked by the
// core (api/init.h), as init_process_group reads them: DISTCOMM_STORE_SERVED_BY, which ft
// used to compare with "launcher" itself, so that a mistyped value, which init refuses,
// meant "rank 0 serves the store" there. The launcher's store is a real TCPStoreServer of
// this process, at MASTER_PORT.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>

#include "api/errors.h"
#include "api/init.h"
#include "api/store/prefix_store.h"
#include "api/store/server/tcp_store_server.h"
#include "api/store/tcp_store.h"
#include "ft/manager.h"
#include "ft/store_keys.h"
#include "tests/testing/test_files.h"

namespace distcomm {
namespace {

class ManagerEnvironment : public ::testing::Test {
 protected:
  void SetUp() override {
    // The in_process plugin, in the test's runfiles: init_process_group's backend here.
    ::setenv("DISTCOMM_PLUGIN_PATH", testing::runfile("tests/testing").c_str(), 1);
    for (const char* v : {"DISTCOMM_STORE_SERVED_BY", "DISTCOMM_BACKEND", "DISTCOMM_RUN_ID", "DISTCOMM_STORE_TOKEN",
                          "DISTCOMM_FT_JOIN", "DISTCOMM_FT_MEMBER_ID", "DISTCOMM_FT_HEARTBEAT_TIMEOUT_MS"}) {
      ::unsetenv(v);
    }
    TCPStoreServerOptions so;
    so.bind_address = "127.0.0.1";
    server_ = std::make_unique<TCPStoreServer>(so);
    server_->start();
    // Rank 0 of a job of one, whose launcher serves the store at MASTER_PORT.
    ::setenv("RANK", "0", 1);
    ::setenv("WORLD_SIZE", "1", 1);
    ::setenv("MASTER_ADDR", "127.0.0.1", 1);
    ::setenv("MASTER_PORT", std::to_string(server_->port()).c_str(), 1);
  }

  // What init_process_group refuses this environment with ("accepted" if nothing).
  static std::string init_refusal() {
    InitOptions o;
    o.backend = "in_process";
    o.timeout = std::chrono::seconds(10);
    try {
      init_process_group(o);
    } catch (const InvalidArgument& e) {
      return e.what();
    } catch (const std::exception& e) {
      return std::string("not an InvalidArgument: ") + e.what();
    }
    destroy_process_group();
    return "accepted";
  }

  // What ft::Manager's constructor refuses it with, its options leaving the store to the
  // environment (no ManagerOptions::connect).
  static std::string manager_refusal() {
    try {
      ft::Manager manager(options());
    } catch (const InvalidArgument& e) {
      return e.what();
    } catch (const std::exception& e) {
      return std::string("not an InvalidArgument: ") + e.what();
    }
    return "accepted";
  }

  static ft::ManagerOptions options() {
    ft::ManagerOptions o;
    o.backend = "in_process";
    // Every store call of the constructor bounded: a refusal that did not come fails the
    // test within seconds, not at the default 30 minutes.
    o.op_timeout = std::chrono::seconds(10);
    return o;
  }

  std::unique_ptr<TCPStoreServer> server_;
};

// The bug: ft took 'laucher' for "not the launcher", so its rank 0 went to serve the store
// the launcher serves (here it fails to listen on the launcher's port; elsewhere it serves
// a second store nobody else uses). Now it is refused before anything connects, in init's
// words.
TEST_F(ManagerEnvironment, AMistypedStoreServedByIsRefusedAsInitRefusesIt) {
  ::setenv("DISTCOMM_STORE_SERVED_BY", "laucher", 1);
  const std::string init = init_refusal();
  EXPECT_EQ(init.rfind("DISTCOMM_STORE_SERVED_BY=\"laucher\": expected 'launcher'", 0), 0u) << init;
  EXPECT_EQ(manager_refusal(), init);
}

// 'launcher' (what tools/launch and spawn() set): rank 0 is a client of the launcher's store,
// as init's is; unset, it serves the store itself (here the launcher's port is taken, so it
// cannot: that it tries shows who it took to serve it).
TEST_F(ManagerEnvironment, TheLaunchersStoreIsUsedAsAClientAndOtherwiseRankZeroServesIt) {
  ::setenv("DISTCOMM_STORE_SERVED_BY", "launcher", 1);
  {
    ft::Manager manager(options());
    TCPStoreOptions so;
    so.host = "127.0.0.1";
    so.port = server_->port();
    so.timeout = std::chrono::seconds(10);
    PrefixStore ft_keys(ft::keys::kRoot, std::make_shared<TCPStore>(so));
    EXPECT_TRUE(ft_keys.check({ft::keys::member("rank0")})) << "its record is not in the launcher's store";
  }
  ::unsetenv("DISTCOMM_STORE_SERVED_BY");
  EXPECT_NE(manager_refusal(), "accepted") << "rank 0 served a store on the launcher's port";
}

// Set to "" (a launcher's template that leaves it empty), rank 0 serves the store, as init's
// does, and its warning says the variable is unset or empty: it said "unset", which it was not.
TEST_F(ManagerEnvironment, AnEmptyStoreServedByIsSaidToBeUnsetOrEmpty) {
  ::setenv("DISTCOMM_STORE_SERVED_BY", "", 1);
  ::testing::internal::CaptureStderr();
  const std::string refusal = manager_refusal();  // the launcher's port is taken: it cannot serve
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(refusal, "accepted") << "rank 0 served a store on the launcher's port";
  EXPECT_NE(said.find("ft: no launcher serves the job's store (DISTCOMM_STORE_SERVED_BY is unset or empty)"),
            std::string::npos)
      << said;
}

}  // namespace
}  // namespace distcomm
