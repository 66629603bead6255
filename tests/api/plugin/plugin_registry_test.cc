// The loader against real shared objects: a good plugin loads and runs; each kind of bad
// one is refused with its reason; a missing backend lists what was searched and what exists.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include "api/errors.h"
#include "api/plugin/plugin_registry.h"
#include "api/process_group.h"
#include "api/version.h"
#include "tests/api/plugin/plugin_load_error.h"
#include "tests/api/plugin_test_env.h"
#include "tests/testing/captured_stderr.h"
#include "tests/testing/test_files.h"

namespace distcomm {
namespace {

class PluginRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override { use_test_plugins(); }
};

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

// An installed distcomm keeps libdistcomm_ft.so and libdistcomm_ddp.so in <prefix>/lib,
// which is searched for plugins: they were listed as backends, and asking for 'ft' dlopened
// it as one. A plugin file named in upper case was listed too, though no spec can name it
// (specs are lower case): the search says the file is there.
TEST_F(PluginRegistryTest, AvailableBackendsAreOnlyPluginsANameCanChoose) {
  const std::string dir = testing::temp_path("installed_lib");
  ::mkdir(dir.c_str(), 0700);
  for (const char* file : {"libdistcomm_ft.so", "libdistcomm_ddp.so", "libdistcomm_Upper.so"}) {
    std::ofstream(dir + "/" + file) << "not loaded";
  }
  ::setenv("DISTCOMM_PLUGIN_PATH", (dir + ":" + test_plugin_dir()).c_str(), 1);
  const std::string msg = load_error("does_not_exist_either");
  const std::string list = msg.substr(msg.find("Available backends: "));
  EXPECT_NE(list.find("single_rank"), std::string::npos) << msg;
  for (const char* name : {" ft,", " ddp,", "Upper"}) EXPECT_EQ(list.find(name), std::string::npos) << name << ": " << msg;

  const std::string ft = load_error("ft");
  EXPECT_NE(ft.find(dir + "/libdistcomm_ft.so: distcomm's fault-tolerance library (ft/), not a backend plugin"),
            std::string::npos)
      << ft;
  EXPECT_EQ(ft.find("dlopen"), std::string::npos) << "it must not be loaded as a plugin: " << ft;

  const std::string upper = load_error("upper");
  EXPECT_NE(upper.find(dir + "/libdistcomm_upper.so: not found (libdistcomm_Upper.so is there, but backend names are "
                             "lower case: rename it libdistcomm_upper.so)"),
            std::string::npos)
      << upper;
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

// What create() of backend `name` throws, as `E`: its message ("" when it threw nothing
// of that type).
template <typename E>
std::string create_error(const std::string& name) {
  BackendOptions o;
  try {
    create_backend(name, o);
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

// An exception a plugin's create() threw reached the program as "boom in ctor", or as
// "unknown exception" when it was not a std::exception: it names the backend and its file
// now, with the message; a distcomm error stays as the plugin threw it (callers catch by
// its type, and its words say what went wrong).
TEST_F(PluginRegistryTest, ACreateThatThrowsNamesTheBackendAndItsFile) {
  const std::string std_error = create_error<Error>("throws_std");
  EXPECT_NE(std_error.find("backend 'throws_std' (" + test_plugin_dir() +
                           "/libdistcomm_throws_std.so): create() threw std::runtime_error: boom in the test "
                           "plugin's ctor"),
            std::string::npos)
      << std_error;
  const std::string int_error = create_error<Error>("throws_int");
  EXPECT_NE(int_error.find("backend 'throws_int' (" + test_plugin_dir() +
                           "/libdistcomm_throws_int.so): create() threw int (not a std::exception)"),
            std::string::npos)
      << int_error;
  const std::string timeout = create_error<Timeout>("throws_timeout");
  EXPECT_EQ(timeout, "rank 0/1 group 'world': while creating backend 'throws_timeout': the test plugin's rendezvous "
                     "timed out")
      << "a distcomm error is the plugin's own words with the rank, group and backend, its type kept";
}

// A plugin whose static initialisation throws (inside dlopen, on the loading thread) ends
// the process: C++ calls std::terminate, and no catch can stop it. The program said only
// "an exception escaped a thread: ...", naming no file: the loader names the backend and the
// file first, with what was thrown.
TEST_F(PluginRegistryTest, APluginThatThrowsAsItLoadsIsNamedAsTheProcessEnds) {
  const std::string dir = test_plugin_dir() + "/at_load";
  const std::string log = testing::temp_path("at_load_stderr");
  const pid_t child = ::fork();
  if (child == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(fd, STDERR_FILENO);
    ::setenv("DISTCOMM_PLUGIN_PATH", dir.c_str(), 1);
    try {
      load_plugin("throws_at_load");
    } catch (...) {
    }
    ::_exit(0);  // not reached: the load ends the process
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the process survived a throwing static initialiser";
  std::ifstream in(log);
  const std::string said((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(said.find("backend 'throws_at_load' (" + dir +
                      "/libdistcomm_throws_at_load.so): the plugin's static initialisation (run by dlopen) threw "
                      "std::runtime_error: static init of the test plugin"),
            std::string::npos)
      << said;
}

// A plugin in DISTCOMM_PLUGIN_PATH named as a built-in backend (one in the program's folder,
// the runfiles or libdistcomm.so's) replaces it: at DISTCOMM_DEBUG=INFO the loader says so,
// naming both files.
TEST_F(PluginRegistryTest, APluginThatReplacesABuiltInOneIsLoggedAtInfo) {
  const std::string dir = test_plugin_dir() + "/replacement";
  // The built-in one: in the runfiles of a search of this test's own (list_backends, which
  // loads every plugin found, never sees it), as backends/<name>/ holds a real one.
  const std::string root = testing::temp_path("runfiles_root");
  const std::string built_in = root + "/distcomm/backends/replaced";
  ASSERT_EQ(std::system(("mkdir -p " + built_in).c_str()), 0);
  ASSERT_EQ(::symlink((dir + "/libdistcomm_replaced.so").c_str(), (built_in + "/libdistcomm_replaced.so").c_str()), 0);
  PluginSearch search;
  search.plugin_path = {dir};
  search.runfiles_roots = {root};
  set_plugin_debug_level(DebugLevel::kInfo);
  testing::CapturedStderr captured;
  const PluginInfo& info = load_plugin("replaced", search);
  const std::string said = captured.text();
  set_plugin_debug_level(DebugLevel::kOff);
  EXPECT_EQ(info.path, dir + "/libdistcomm_replaced.so");
  EXPECT_NE(said.find("backend 'replaced': using " + dir +
                      "/libdistcomm_replaced.so (from DISTCOMM_PLUGIN_PATH) in place of the built-in "),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("in place of the built-in " + built_in + "/libdistcomm_replaced.so"), std::string::npos) << said;
  EXPECT_EQ(std::count(said.begin(), said.end(), '\n'), 1) << said;
}

}  // namespace
}  // namespace distcomm
