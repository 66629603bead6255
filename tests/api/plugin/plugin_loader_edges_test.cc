// The loader's edges an outside plugin's author met: distcomm's own libdistcomm_torch.so
// taken for a plugin; backend names that are paths; a refused file skipped silently for a
// later one, and listed as available; a plugin that says it cannot run without a reason;
// a plugin whose static initialisation throws, said by run_main as "escaped a thread".
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include "api/errors.h"
#include "api/group/backend_spec.h"
#include "api/plugin/elf_extent.h"
#include "api/plugin/plugin_registry.h"
#include "api/run_main.h"
#include "tests/api/plugin/plugin_load_error.h"
#include "tests/api/plugin_test_env.h"
#include "tests/testing/captured_stderr.h"
#include "tests/testing/test_files.h"

namespace distcomm {
namespace {

class PluginLoaderEdges : public ::testing::Test {
 protected:
  void SetUp() override { use_test_plugins(); }
};

std::string fresh_dir(const std::string& name) {
  const std::string dir = testing::temp_path(name);
  ::mkdir(dir.c_str(), 0700);
  return dir;
}

// An installed distcomm keeps libdistcomm_torch.so (the libtorch integration) in <prefix>/lib
// with libdistcomm_ft.so and libdistcomm_ddp.so: it was listed as a backend, and asking for
// 'torch' dlopened it (libtorch and its initialisers) to say "no entry point".
TEST_F(PluginLoaderEdges, TheTorchIntegrationIsNoPlugin) {
  const std::string dir = fresh_dir("installed_lib_torch");
  std::ofstream(dir + "/libdistcomm_torch.so") << "not loaded";
  ::setenv("DISTCOMM_PLUGIN_PATH", (dir + ":" + test_plugin_dir()).c_str(), 1);
  const std::string msg = load_error("does_not_exist_here");
  const std::string list = msg.substr(msg.find("Available backends: "));
  EXPECT_NE(list.find("single_rank"), std::string::npos) << msg;
  EXPECT_EQ(list.find("torch"), std::string::npos) << msg;
  const std::string torch = load_error("torch");
  EXPECT_NE(torch.find(dir + "/libdistcomm_torch.so: distcomm's libtorch integration (integrations/torch/), not a "
                             "backend plugin"),
            std::string::npos)
      << torch;
  EXPECT_EQ(torch.find("dlopen"), std::string::npos) << torch;
  const auto names = non_plugin_library_names();
  for (const char* n : {"ft", "ddp", "torch"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  }
}

// docs/writing-a-plugin.md names every library the loader never takes for a plugin.
TEST_F(PluginLoaderEdges, TheDocsNameEveryNonPluginLibrary) {
  std::ifstream in(testing::runfile("docs/writing-a-plugin.md"));
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(doc.empty());
  for (const std::string& n : non_plugin_library_names()) {
    EXPECT_NE(doc.find("`libdistcomm_" + n + ".so`"), std::string::npos) << n;
  }
}

// A name is refused before any file is looked up: 'sto/rebk' searched sub-folders, and
// '../x' other folders (dlopen runs a file's initialisers before the name check).
TEST_F(PluginLoaderEdges, ANameThatIsNoPluginNameIsRefusedBeforeAnyLookUp) {
  for (const std::string name : {"sto/rebk", "a b", "../plugins/libdistcomm_single_rank", "", "x.y", "gl-oo"}) {
    try {
      load_plugin(name);
      ADD_FAILURE() << "loaded '" << name << "'";
    } catch (const InvalidArgument& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind("invalid backend name '" + name + "': ", 0), 0u) << what;
      EXPECT_EQ(what.find("Searched"), std::string::npos) << what;
    } catch (const std::exception& e) {
      ADD_FAILURE() << name << ": " << e.what();
    }
  }
  EXPECT_THROW(BackendSpec::parse("cpu:sto/rebk"), InvalidArgument);
  EXPECT_THROW(BackendSpec::parse("a b"), InvalidArgument);
  try {
    BackendSpec::parse("../plug/libdistcomm_storebk");
    ADD_FAILURE() << "parsed";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()).rfind("invalid backend name '../plug/libdistcomm_storebk': '.' is not allowed", 0),
              0u)
        << e.what();
  }
  // The names that exist stay valid.
  EXPECT_NO_THROW(BackendSpec::parse("cpu:gloo,cuda:nccl"));
  EXPECT_NO_THROW(BackendSpec::parse("GLOO"));
  EXPECT_NO_THROW(BackendSpec::parse("cpu:auto"));
  EXPECT_NO_THROW(load_plugin("abi_1_0"));
}

// DISTCOMM_PLUGIN_PATH=dirA:dirB with dirA's file refused (another ABI major): dirB's loads,
// and a warning names the file skipped, why, and the file loaded.
TEST_F(PluginLoaderEdges, ARefusedFileSkippedForALaterOneIsLogged) {
  const std::string dir = fresh_dir("refused_first");
  ASSERT_EQ(::symlink((test_plugin_dir() + "/libdistcomm_old_abi.so").c_str(), (dir + "/libdistcomm_any_size.so").c_str()),
            0);
  PluginSearch search;
  search.plugin_path = {dir, test_plugin_dir()};
  testing::CapturedStderr captured;
  const PluginInfo& info = load_plugin("any_size", search);
  const std::string said = captured.text();
  EXPECT_EQ(info.path, test_plugin_dir() + "/libdistcomm_any_size.so");
  EXPECT_NE(said.find("warning: backend 'any_size': loaded " + test_plugin_dir() + "/libdistcomm_any_size.so"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find(dir + "/libdistcomm_any_size.so (refused: plugin ABI major 99"), std::string::npos) << said;
}

// A directory of a plugin's name was listed as "not found", though it is there.
TEST_F(PluginLoaderEdges, ADirectoryOfAPluginsNameIsSaidToBeOne) {
  const std::string dir = fresh_dir("directory_named_as_plugin");
  ::mkdir((dir + "/libdistcomm_nowhere_else.so").c_str(), 0700);
  PluginSearch search;
  search.plugin_path = {dir};
  const std::string msg = load_error_in("nowhere_else", search);
  EXPECT_NE(msg.find(dir + "/libdistcomm_nowhere_else.so: a directory, not a file"), std::string::npos) << msg;
}

// A plugin file cut short (a copy that did not finish) made dlopen end the process with
// SIGBUS as it mapped the missing bytes: it is refused with the reason instead, wherever it
// is cut, and a whole copy later in the search path loads.
TEST_F(PluginLoaderEdges, APluginFileCutShortIsRefusedNotLoaded) {
  const std::string whole = test_plugin_dir() + "/libdistcomm_single_rank.so";
  std::ifstream in(whole, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 40000u);  // its loadable segments end past the cuts below (readelf -l)
  EXPECT_EQ(internal::elf_cut_short(whole), "");
  std::string last_dir;
  for (const size_t cut : {size_t{1000}, size_t{5000}, size_t{20000}}) {
    last_dir = fresh_dir("cut_short_" + std::to_string(cut));
    const std::string file = last_dir + "/libdistcomm_single_rank.so";
    std::ofstream(file, std::ios::binary) << bytes.substr(0, cut);
    EXPECT_EQ(internal::elf_cut_short(file).rfind("the file is cut short: " + std::to_string(cut) + " bytes, but its segments need ", 0), 0u)
        << "cut at " << cut << ": " << internal::elf_cut_short(file);
  }
  // Through the loader (once: a loaded plugin stays loaded): refused, skipped, said.
  PluginSearch search;
  search.plugin_path = {last_dir, test_plugin_dir()};
  testing::CapturedStderr captured;
  const PluginInfo& info = load_plugin("single_rank", search);
  EXPECT_EQ(info.path, whole);
  const std::string said = captured.text();
  EXPECT_NE(said.find(last_dir + "/libdistcomm_single_rank.so (refused: the file is cut short: "), std::string::npos)
      << said;
}

// "Available backends" listed the very backend whose files were all refused.
TEST_F(PluginLoaderEdges, TheBackendThatCannotLoadIsMarkedInTheList) {
  const std::string msg = load_error("old_abi");
  const std::string list = msg.substr(msg.find("Available backends: "));
  EXPECT_NE(list.find("old_abi (refused: see above)"), std::string::npos) << msg;
  EXPECT_NE(list.find("single_rank"), std::string::npos) << msg;
}

// Every error create() throws says the rank, group and backend; one that already begins
// with a rank is left as it is.
// The options of rank 1 of a group 'g' of 2, as the errors below name them.
BackendOptions rank_1_of_2_in_g() {
  BackendOptions o;
  o.rank = 1;
  o.size = 2;
  o.group_name = "g";
  return o;
}

TEST_F(PluginLoaderEdges, ACreateErrorNamesTheRankGroupAndBackend) {
  ::setenv("DISTCOMM_PLUGIN_PATH", test_plugin_dir().c_str(), 1);
  const BackendOptions o = rank_1_of_2_in_g();
  try {
    create_backend("throws_timeout", o);
    FAIL() << "no error";
  } catch (const Timeout& e) {
    EXPECT_EQ(std::string(e.what()),
              "rank 1/2 group 'g': while creating backend 'throws_timeout': the test plugin's rendezvous timed out");
  }
  const auto rethrown = backend_creation_error(
      std::make_exception_ptr(Timeout("rank 1/2 group 'g' (mine): init timed out")), "mine", o, "/p");
  EXPECT_EQ(message_of(rethrown), "rank 1/2 group 'g' (mine): init timed out");
  const auto invalid =
      backend_creation_error(std::make_exception_ptr(InvalidArgument("mine_slots='1'")), "mine", o, "/p");
  EXPECT_EQ(message_of(invalid), "rank 1/2 group 'g' (mine): mine_slots='1'");
}

// A new backend's name() and supported_ops(), which the core asks at once: an exception
// there reached the program bare ("supported_ops exploded", naming no plugin), and a name()
// other than the plugin's was taken, so that its errors named another backend or none.
TEST_F(PluginLoaderEdges, ANewBackendsNameAndOpsAreAskedAsCreateIs) {
  ::setenv("DISTCOMM_PLUGIN_PATH", test_plugin_dir().c_str(), 1);
  const BackendOptions o = rank_1_of_2_in_g();
  const std::string dir = test_plugin_dir();
  const auto error_of = [&](const std::string& name) {
    try {
      create_backend(name, o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of("throws_in_supported_ops"),
            "rank 1/2 group 'g': while creating backend 'throws_in_supported_ops' (" + dir +
                "/libdistcomm_throws_in_supported_ops.so): supported_ops() threw std::runtime_error: supported_ops "
                "exploded");
  EXPECT_EQ(error_of("throws_in_name"), "rank 1/2 group 'g': while creating backend 'throws_in_name' (" + dir +
                                            "/libdistcomm_throws_in_name.so): name() threw std::runtime_error: name "
                                            "exploded");
  // A name() other than the plugin's is said once, not refused (plugins built before the
  // rule keep loading).
  testing::CapturedStderr captured;
  EXPECT_EQ(error_of("misnamed"), "no error");
  error_of("misnamed");
  const std::string said = captured.text();
  const std::string warning = "warning: backend 'misnamed' (" + dir +
                              "/libdistcomm_misnamed.so): its Backend::name() says 'another_name', not its plugin's "
                              "name: its errors will name 'another_name'; return 'misnamed' from name()";
  const size_t first = said.find(warning);
  EXPECT_NE(first, std::string::npos) << said;
  EXPECT_EQ(said.find(warning, first + 1), std::string::npos) << "said twice: " << said;
}

TEST_F(PluginLoaderEdges, AnUnavailablePluginWithoutAReasonSaysSo) {
  ::setenv("DISTCOMM_PLUGIN_PATH", (test_plugin_dir() + "/no_reason").c_str(), 1);
  try {
    create_backend("no_reason", BackendOptions{});
    FAIL() << "no error";
  } catch (const BackendUnavailable& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cannot run here: (the plugin gave no reason)"), std::string::npos) << what;
  }
}

// Under run_main, a plugin whose static initialisation throws: the last line said "an
// exception escaped a thread", on the main thread's dlopen, naming no plugin.
TEST_F(PluginLoaderEdges, RunMainNamesThePluginWhoseInitialisersThrew) {
  const std::string dir = test_plugin_dir() + "/at_load";
  const std::string log = testing::temp_path("run_main_at_load_stderr");
  const pid_t child = ::fork();
  if (child == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(fd, STDERR_FILENO);
    ::setenv("DISTCOMM_PLUGIN_PATH", dir.c_str(), 1);
    ::_exit(run_main("prog", [] {
      load_plugin("throws_at_load");
      return 0;
    }));
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::ifstream in(log);
  const std::string said((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(said.find("prog: loading plugin " + dir +
                      "/libdistcomm_throws_at_load.so threw std::runtime_error: static init of the test plugin from "
                      "its static initialisers"),
            std::string::npos)
      << said;
  EXPECT_EQ(said.find("escaped a thread"), std::string::npos) << said;
}

}  // namespace
}  // namespace distcomm
