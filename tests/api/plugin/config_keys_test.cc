// Backend settings: each plugin declares the keys it reads; init refuses any other key
// before anything connects, reads each declared key's environment variable, and the table of
// settings in docs/environment.md is exactly what the plugins declare.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>

#include "api/errors.h"
#include "api/store/hash_store.h"
#include "api/init.h"
#include "api/plugin/plugin_registry.h"
#include "tests/api/plugin_test_env.h"

namespace distcomm {
namespace {

class ConfigKeys : public ::testing::Test {
 protected:
  void SetUp() override {
    use_test_plugins();
    for (const char* v : {"DISTCOMM_GLOO_ALGORITHM", "DISTCOMM_SOCKET_IFNAME", "DISTCOMM_GLOO_WORKER_SCHED"}) {
      ::unsetenv(v);
    }
  }
  void TearDown() override { destroy_process_group(); }

  // A world of `world` on a store of this process: rank 0 alone, so that anything that
  // waits for the other ranks would time out rather than fail at once.
  static InitOptions options(const std::string& backend, int world = 1) {
    InitOptions o;
    o.backend = backend;
    o.rank = 0;
    o.world_size = world;
    o.store = std::make_shared<HashStore>();
    o.timeout = std::chrono::seconds(30);
    return o;
  }
};

std::string init_error(const InitOptions& o) {
  try {
    init_process_group(o);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  ADD_FAILURE() << "init_process_group accepted the options";
  return "";
}

TEST_F(ConfigKeys, AnUnknownKeyIsRefusedBeforeTheRendezvousNamingTheKnownOnes) {
  InitOptions o = options("gloo", /*world=*/2);
  o.backend_config["algoritm"] = "ring";
  const auto start = std::chrono::steady_clock::now();
  const std::string msg = init_error(o);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5)) << "refused before waiting for peers";
  EXPECT_NE(msg.find("'algoritm'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("gloo: ifname, hostname, algorithm, worker_sched, loop_sched"), std::string::npos) << msg;
  EXPECT_NE(msg.find("master_addr, local_rank"), std::string::npos) << "the keys init sets: " << msg;
}

TEST_F(ConfigKeys, APluginThatReadsNoKeysRefusesEveryKey) {
  InitOptions o = options("template");
  o.backend_config["ifname"] = "lo";
  EXPECT_NE(init_error(o).find("template: none"), std::string::npos);
}

TEST_F(ConfigKeys, TheKeysInitSetsAreAcceptedByEveryBackend) {
  InitOptions o = options("template");
  o.backend_config["local_rank"] = "0";
  o.backend_config["launcher"] = "torchrun";
  EXPECT_NO_THROW(init_process_group(o));
}

TEST_F(ConfigKeys, AKeyOfAnyBackendOfAMixedGroupIsAccepted) {
  InitOptions o = options("cpu:gloo,cuda:nccl");
  o.backend_config["blocking_wait"] = "1";  // nccl's
  o.backend_config["algorithm"] = "ring";   // gloo's
  EXPECT_NO_THROW(init_process_group(o));
  destroy_process_group();
  o.backend_config["watchdog"] = "1";
  EXPECT_NE(init_error(o).find("'watchdog'"), std::string::npos);
}

TEST_F(ConfigKeys, APluginThatDeclaresNoKeysIsNotChecked) {
  InitOptions o = options("abi_1_0");
  o.backend_config["anything"] = "1";
  EXPECT_NO_THROW(init_process_group(o));
}

TEST_F(ConfigKeys, ADeclaredKeyIsReadFromItsEnvironmentVariable) {
  ::setenv("DISTCOMM_GLOO_ALGORITHM", "no_such_algorithm", 1);
  const std::string msg = init_error(options("gloo"));
  EXPECT_NE(msg.find("'no_such_algorithm'"), std::string::npos) << "gloo got the variable's value: " << msg;
  // What the program sets wins over the environment.
  InitOptions o = options("gloo");
  o.backend_config["algorithm"] = "ring";
  EXPECT_NO_THROW(init_process_group(o));
}

TEST_F(ConfigKeys, AnotherBackendsVariableIsNotRead) {
  ::setenv("DISTCOMM_SOCKET_IFNAME", "no_such_interface0", 1);  // gloo's
  EXPECT_NO_THROW(init_process_group(options("template")));
}

// A plugin in DISTCOMM_PLUGIN_PATH that replaces a built-in one is said at DISTCOMM_DEBUG=INFO
// when init loads it. init loads the backends that take settings before anything else (to
// read their variables): the level was set after that load, and the line never came.
// The registry keeps what a process loaded (this binary's other tests load the built-in
// gloo), so the init runs in a fresh run of this binary, which runs this test alone.
TEST_F(ConfigKeys, InitSaysAtInfoThatAPluginReplacesABuiltInOne) {
  if (const char* replacing = std::getenv("CONFIG_KEYS_TEST_REPLACING_DIR")) {
    ::setenv("DISTCOMM_PLUGIN_PATH", replacing, 1);
    ::setenv("DISTCOMM_DEBUG", "INFO", 1);
    init_process_group(options("gloo"));
    return;
  }
  const std::string dir = testing::temp_path("replacing_gloo");
  const std::string said_file = dir + "/stderr";
  ASSERT_EQ(std::system(("mkdir -p " + dir + " && cp " + testing::runfile("backends/gloo/libdistcomm_gloo.so") +
                         " " + dir + "/libdistcomm_gloo.so")
                            .c_str()),
            0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::setenv("CONFIG_KEYS_TEST_REPLACING_DIR", dir.c_str(), 1);
    const int fd = ::open(said_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 2);
    ::execl("/proc/self/exe", "config_keys_test", "--gtest_filter=ConfigKeys.InitSaysAtInfoThatAPluginReplacesABuiltInOne",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  std::ifstream in(said_file);
  const std::string said((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << said;
  EXPECT_NE(said.find("backend 'gloo': using " + dir + "/libdistcomm_gloo.so (from DISTCOMM_PLUGIN_PATH) in place of "
                      "the built-in "),
            std::string::npos)
      << said;
}

// docs/environment.md's table, as the descriptors write it.
std::string table_from_descriptors() {
  auto cell = [](const std::string& text) { return text.empty() ? std::string(" ") : " `" + text + "` "; };
  std::string table = "| backend | key | environment | default | meaning |\n|---|---|---|---|---|\n";
  for (const ConfigKey& k : core_config_keys()) {
    table += "| (all) |" + cell(k.name) + "|" + cell(k.env) + "|" + cell(k.default_value) + "| " + k.help + " |\n";
  }
  for (const char* backend : {"gloo", "mpi", "nccl", "shm"}) {
    for (const ConfigKey& k : load_plugin(backend).config_keys) {
      table += "|" + cell(backend) + "|" + cell(k.name) + "|" + cell(k.env) + "|" + cell(k.default_value) + "| " +
               k.help + " |\n";
    }
  }
  return table;
}

TEST_F(ConfigKeys, DocsListEveryKeyAsThePluginsDeclareIt) {
  const std::string page = "docs/environment.md";
  const std::string text = testing::read_file(testing::runfile(page));
  ASSERT_FALSE(text.empty()) << page << " is not in the runfiles";
  const std::string begin = "<!-- backend settings: begin -->\n", end = "<!-- backend settings: end -->";
  const size_t from = text.find(begin), to = text.find(end);
  ASSERT_NE(from, std::string::npos) << page << " has no '" << begin << "'";
  ASSERT_NE(to, std::string::npos);
  const std::string expected = table_from_descriptors();
  EXPECT_EQ(text.substr(from + begin.size(), to - from - begin.size()), expected)
      << page << "'s table of backend settings differs from the plugins' declarations; it should read:\n"
      << expected;
}

}  // namespace
}  // namespace distcomm
