// The loader against real shared objects: a good plugin loads and runs; each kind of bad
// one is refused with its reason; a missing backend lists what was searched and what exists.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>

#include "api/errors.h"
#include "api/plugin/plugin_registry.h"
#include "api/process_group.h"
#include "api/version.h"
#include "tests/api/plugin_test_env.h"

namespace distcomm {
namespace {

class PluginRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override { use_test_plugins(); }
};

std::string load_error(const std::string& name) {
  try {
    load_plugin(name);
  } catch (const BackendUnavailable& e) {
    return e.what();
  }
  return "";
}

TEST_F(PluginRegistryTest, LoadsAGoodPluginAndChecksItsDescriptor) {
  const PluginInfo& info = load_plugin("single_rank");
  EXPECT_EQ(info.name, "single_rank");
  EXPECT_TRUE(info.available);
  EXPECT_NE(info.path.find("libdistcomm_single_rank.so"), std::string::npos);
  EXPECT_EQ(info.devices, DISTCOMM_DEVICE_CPU);
  // Loading twice gives the same plugin (loaded once per process).
  EXPECT_EQ(&load_plugin("single_rank"), &info);
}

// The descriptor grows at its end (ABI minor bumps): a plugin built against 1.0 loads, and
// declares no config keys.
TEST_F(PluginRegistryTest, LoadsAPluginOfAnEarlierAbiMinor) {
  const PluginInfo& info = load_plugin("abi_1_0");
  EXPECT_TRUE(info.available);
  EXPECT_EQ(info.abi_minor, 0u);
  EXPECT_FALSE(info.declares_config);
  EXPECT_TRUE(info.config_keys.empty());
  BackendOptions o;
  EXPECT_EQ(create_backend("abi_1_0", o)->name(), "abi_1_0");
}

TEST_F(PluginRegistryTest, ReadsTheConfigKeysAPluginDeclares) {
  const PluginInfo& info = load_plugin("template");
  EXPECT_EQ(info.abi_minor, static_cast<uint32_t>(DISTCOMM_PLUGIN_ABI_MINOR));
  EXPECT_TRUE(info.declares_config) << "an empty list declares that it reads none";
  EXPECT_TRUE(info.config_keys.empty());
  EXPECT_FALSE(load_plugin("single_rank").declares_config) << "DISTCOMM_DEFINE_PLUGIN declares nothing";
}

TEST_F(PluginRegistryTest, RefusesAnotherAbiMajorNamingBothValues) {
  const std::string msg = load_error("old_abi");
  EXPECT_NE(msg.find("plugin ABI major 99 differs from the core's " + std::to_string(DISTCOMM_PLUGIN_ABI_MAJOR)),
            std::string::npos)
      << msg;
}

TEST_F(PluginRegistryTest, RefusesAnotherToolchainNamingBoth) {
  const std::string msg = load_error("other_toolchain");
  EXPECT_NE(msg.find("'msvc-19/msvcprt'"), std::string::npos) << msg;
  EXPECT_NE(msg.find(DISTCOMM_TOOLCHAIN_TAG), std::string::npos) << msg;
}

TEST_F(PluginRegistryTest, RefusesASharedObjectWithoutEntryPoint) {
  const std::string msg = load_error("no_entry");
  EXPECT_NE(msg.find("no entry point distcomm_backend_plugin_v1"), std::string::npos) << msg;
}

TEST_F(PluginRegistryTest, MissingBackendListsSearchPathAndAvailableBackends) {
  const std::string msg = load_error("does_not_exist");
  EXPECT_NE(msg.find("cannot load backend 'does_not_exist'"), std::string::npos) << msg;
  EXPECT_NE(msg.find(test_plugin_dir() + "/libdistcomm_does_not_exist.so: not found"), std::string::npos) << msg;
  // The built-in names first: they are backends a program may name as well as the plugins.
  EXPECT_NE(msg.find("Available backends: auto, hier, "), std::string::npos) << msg;
  EXPECT_NE(msg.find("single_rank"), std::string::npos) << msg;
  EXPECT_NE(msg.find("DISTCOMM_PLUGIN_PATH"), std::string::npos) << msg;
}

TEST_F(PluginRegistryTest, UnavailableBackendSaysWhyOnCreate) {
  const PluginInfo& info = load_plugin("unavailable");
  EXPECT_FALSE(info.available);
  EXPECT_NE(info.unavailable_reason.find("no test device"), std::string::npos);
  BackendOptions o;
  o.device = DeviceType::kCUDA;
  try {
    create_backend("unavailable", o);
    FAIL() << "expected BackendUnavailable";
  } catch (const BackendUnavailable& e) {
    EXPECT_NE(std::string(e.what()).find("cannot run here: no test device"), std::string::npos) << e.what();
  }
}

TEST_F(PluginRegistryTest, ListBackendsFindsEveryPluginFile) {
  bool single = false, old_abi = false;
  for (const auto& p : list_backends()) {
    if (p.name == "single_rank") single = p.available;
    if (p.name == "old_abi") old_abi = !p.unavailable_reason.empty();
  }
  EXPECT_TRUE(single);
  EXPECT_TRUE(old_abi);
}

// backends/template is found without DISTCOMM_PLUGIN_PATH: through the Bazel runfiles.
TEST_F(PluginRegistryTest, FindsInTreePluginsInTheRunfiles) {
  const PluginInfo& info = load_plugin("template");
  EXPECT_NE(info.path.find("/backends/template/libdistcomm_template.so"), std::string::npos) << info.path;
  BackendOptions o;
  auto backend = create_backend("template", o);
  EXPECT_EQ(backend->name(), "template");
}

TEST_F(PluginRegistryTest, EnvironmentPathIsSearchedFirst) {
  const auto path = plugin_search_path();
  ASSERT_FALSE(path.empty());
  EXPECT_EQ(path.front(), test_plugin_dir());
}

// The core searches the folders it is given (what init_process_group read, once), not the
// environment of the moment.
TEST_F(PluginRegistryTest, TheSearchGivenIsUsedNotTheEnvironment) {
  PluginSearch given;
  given.plugin_path = {"/given/a", "/given/b"};
  ::setenv("DISTCOMM_PLUGIN_PATH", "/from/the/environment:", 1);
  const auto path = plugin_search_path(given);
  ASSERT_GE(path.size(), 2u);
  EXPECT_EQ(path[0], "/given/a");
  EXPECT_EQ(path[1], "/given/b");
  EXPECT_EQ(std::count(path.begin(), path.end(), "/from/the/environment"), 0);
  EXPECT_EQ(PluginSearch::from_environment().plugin_path, std::vector<std::string>{"/from/the/environment"});
}

// Last come the folder of libdistcomm.so and its distcomm/plugins/, where an installed
// distcomm keeps its plugins (<prefix>/lib/distcomm/plugins), found with no variable set.
TEST_F(PluginRegistryTest, CoreFolderAndItsPluginsFolderComeLast) {
  const auto path = plugin_search_path();
  ASSERT_GE(path.size(), 2u);
  EXPECT_EQ(path.back(), path[path.size() - 2] + "/distcomm/plugins");
  EXPECT_TRUE(std::ifstream(path[path.size() - 2] + "/libdistcomm.so." DISTCOMM_SONAME_VERSION).good())
      << path[path.size() - 2];
}

// An exception type thrown inside the dlopen'ed plugin is caught by its type here: there
// is one copy of the core's typeinfo in the process.
TEST_F(PluginRegistryTest, PluginExceptionsKeepTheirType) {
  BackendOptions o;
  o.size = 2;  // the single_rank backend refuses this with InvalidArgument
  o.rank = 0;
  EXPECT_THROW(create_backend("single_rank", o), InvalidArgument);
}

}  // namespace
}  // namespace distcomm
