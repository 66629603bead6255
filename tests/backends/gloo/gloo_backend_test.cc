// The gloo plugin as the loader and a user see it: its descriptor, its configuration
// (interface, algorithm and worker scheduling, with clear errors), and its rendezvous.
#include <dirent.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <vector>

#include <gtest/gtest.h>

#include "api/errors.h"
#include "api/store/hash_store.h"
#include "api/plugin/plugin_registry.h"
#include "api/process_group.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace {

using std::chrono::milliseconds;

// A group of `size` created on this process alone (size 1 needs no peers).
ProcessGroupPtr make_local_group(int size, std::map<std::string, std::string> config,
                                 milliseconds timeout = milliseconds(60000)) {
  auto store = std::make_shared<HashStore>();
  store->set_timeout(timeout);
  ProcessGroupOptions o;
  o.store = store;
  o.size = size;
  o.backend = "gloo";
  o.timeout = timeout;
  o.backend_config = std::move(config);
  return ProcessGroup::create(o);
}

std::string creation_error(std::map<std::string, std::string> config) {
  try {
    make_local_group(1, std::move(config));
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  ADD_FAILURE() << "group creation succeeded";
  return "";
}

TEST(GlooPlugin, DescribesItself) {
  const PluginInfo& info = load_plugin("gloo");
  EXPECT_EQ(info.name, "gloo");
  EXPECT_EQ(info.version.rfind("gloo 0.5", 0), 0u) << info.version;
  EXPECT_EQ(info.devices, DISTCOMM_DEVICE_CPU);
  EXPECT_TRUE(info.available) << info.unavailable_reason;
}

TEST(GlooPlugin, WorldOfOneRunsWithoutPeers) {
  auto pg = make_local_group(1, {});
  Tensor t = Tensor::of<float>({1, 2, 3});
  pg->all_reduce(t)->wait();
  EXPECT_EQ(t.to_doubles(), (std::vector<double>{1, 2, 3}));
  pg->barrier()->wait();
}

TEST(GlooConfig, UnknownAlgorithmIsRefusedWithTheChoices) {
  const std::string msg = creation_error({{"algorithm", "fastest"}});
  EXPECT_NE(msg.find("'fastest'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("halving_doubling"), std::string::npos) << msg;
}

// The scheduling policies of this process's threads named `name`.
std::vector<int> policies_of_threads_named(const std::string& name) {
  std::vector<int> policies;
  DIR* tasks = opendir("/proc/self/task");
  if (!tasks) return policies;
  while (dirent* e = readdir(tasks)) {
    if (e->d_name[0] == '.') continue;
    std::string comm;
    std::getline(std::ifstream(std::string("/proc/self/task/") + e->d_name + "/comm"), comm);
    if (comm == name) policies.push_back(sched_getscheduler(std::stoi(e->d_name)));
  }
  closedir(tasks);
  return policies;
}

TEST(GlooConfig, WorkerRunsAsNormalUnlessToldBatch) {
  {
    auto pg = make_local_group(1, {});
    EXPECT_EQ(policies_of_threads_named("dc-gloo-worker"), std::vector<int>{SCHED_OTHER});
  }
  // Two ranks in batch mode: the worker thread is SCHED_BATCH and still moves the bytes.
  testing::GroupHarnessOptions o;
  o.backend_config["worker_sched"] = "batch";
  testing::run_group(2, "gloo", [](ProcessGroup& pg) {
    EXPECT_EQ(policies_of_threads_named("dc-gloo-worker"), std::vector<int>{SCHED_BATCH}) << "rank " << pg.rank();
    Tensor t = Tensor::of<float>({float(pg.rank() + 1), 10});
    pg.all_reduce(t)->wait();
    EXPECT_EQ(t.to_doubles(), (std::vector<double>{3, 20})) << "rank " << pg.rank();
  }, o);
}

// gloo's network thread is found and set up from inside its loop (gloo_loop_thread.h): it
// carries the name, and is SCHED_BATCH unless the config says normal.
TEST(GlooConfig, NetworkThreadRunsAsBatchUnlessToldNormal) {
  {
    auto pg = make_local_group(1, {});
    EXPECT_EQ(policies_of_threads_named("dc-gloo-loop"), std::vector<int>{SCHED_BATCH});
  }
  {
    auto pg = make_local_group(1, {{"loop_sched", "normal"}});
    EXPECT_EQ(policies_of_threads_named("dc-gloo-loop"), std::vector<int>{SCHED_OTHER});
  }
  // Two ranks: each rank's network thread is SCHED_BATCH and still reads every message,
  // small and large (several segments of gloo's ring).
  testing::run_group(2, "gloo", [](ProcessGroup& pg) {
    EXPECT_EQ(policies_of_threads_named("dc-gloo-loop"), std::vector<int>{SCHED_BATCH}) << "rank " << pg.rank();
    for (size_t count : {size_t{2}, size_t{1} << 20}) {
      Tensor t = Tensor::of<float>(std::vector<float>(count, float(pg.rank() + 1)));
      pg.all_reduce(t)->wait();
      const std::vector<double> sums = t.to_doubles();
      EXPECT_EQ(std::count(sums.begin(), sums.end(), 3.0), static_cast<long>(count)) << "rank " << pg.rank();
    }
  });
}

// A process's gloo groups spread over network_threads TCP devices (gloo_shared_device.h):
// a group gets a device, and so a network thread, of its own while there are fewer, then
// shares one, so that many groups do not make a thread each, and each thread still reads
// every group it serves. Checked with the default 1, with 2 and with 8, ops of every group
// at once, and the threads of groups that are gone gone with them.
void expect_network_threads(const std::map<std::string, std::string>& config, size_t with_two_groups,
                            size_t with_five_groups) {
  testing::GroupHarnessOptions o;
  o.backend_config = config;
  testing::run_group(
      2, "gloo",
      [&](ProcessGroup& pg) {
        std::vector<std::shared_ptr<ProcessGroup>> groups;
        groups.push_back(pg.new_group({0, 1}));
        EXPECT_EQ(policies_of_threads_named("dc-gloo-loop"), std::vector<int>(with_two_groups, SCHED_BATCH))
            << "rank " << pg.rank() << ", the world and 1 group";
        for (int i = 0; i < 3; ++i) groups.push_back(pg.new_group({0, 1}));
        EXPECT_EQ(policies_of_threads_named("dc-gloo-loop"), std::vector<int>(with_five_groups, SCHED_BATCH))
            << "rank " << pg.rank() << ", the world and 4 groups";
        std::vector<Tensor> tensors;
        std::vector<std::shared_ptr<Work>> works;
        for (size_t i = 0; i < groups.size(); ++i) {
          tensors.push_back(Tensor::of<float>(std::vector<float>(size_t{1} << 18, float((pg.rank() + 1) * (i + 1)))));
        }
        for (size_t i = 0; i < groups.size(); ++i) works.push_back(groups[i]->all_reduce(tensors[i]));
        for (size_t i = 0; i < groups.size(); ++i) {
          works[i]->wait();
          const std::vector<double> sums = tensors[i].to_doubles();
          EXPECT_EQ(std::count(sums.begin(), sums.end(), 3.0 * (i + 1)), static_cast<long>(sums.size()))
              << "rank " << pg.rank() << " group " << i;
        }
        groups.clear();
        EXPECT_EQ(policies_of_threads_named("dc-gloo-loop"), std::vector<int>{SCHED_BATCH})
            << "rank " << pg.rank() << ", the world alone";
      },
      o);
}

TEST(GlooConfig, GroupsOfAProcessShareOneNetworkThreadByDefault) { expect_network_threads({}, 1, 1); }

TEST(GlooConfig, GroupsOfAProcessSpreadOverTwoNetworkThreadsWhenTold) {
  expect_network_threads({{"network_threads", "2"}}, 2, 2);
}

TEST(GlooConfig, GroupsOfAProcessGetANetworkThreadEachUpToNetworkThreads) {
  expect_network_threads({{"network_threads", "8"}}, 2, 5);
}

TEST(GlooConfig, NetworkThreadsOutsideItsRangeAreRefused) {
  const std::string msg = creation_error({{"network_threads", "0"}});
  EXPECT_NE(msg.find("network_threads='0'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[1, 64]"), std::string::npos) << msg;
}

// Ranks forked while a gloo group of their parent lives (spawn's, this harness's) inherit
// the parent's shared device in memory but not its network thread: they make their own, or
// their ops would wait for bytes nobody reads.
TEST(GlooConfig, RanksForkedWhileAGroupLivesMakeTheirOwnNetworkThread) {
  auto parents = make_local_group(1, {});
  testing::run_group(2, "gloo", [](ProcessGroup& pg) {
    EXPECT_EQ(policies_of_threads_named("dc-gloo-loop"), std::vector<int>{SCHED_BATCH}) << "rank " << pg.rank();
    Tensor t = Tensor::of<float>(std::vector<float>(size_t{1} << 18, float(pg.rank() + 1)));
    pg.all_reduce(t)->wait();
    const std::vector<double> sums = t.to_doubles();
    EXPECT_EQ(std::count(sums.begin(), sums.end(), 3.0), static_cast<long>(sums.size())) << "rank " << pg.rank();
  });
}

// A program that runs with a real-time policy (chrt) keeps it on gloo's network thread, which
// inherits it from the thread that creates the group: batch would let the callers starve it.
TEST(GlooConfig, NetworkThreadKeepsARealTimePolicy) {
  sched_param rt{};
  rt.sched_priority = 1;
  sched_param before{};
  int before_policy = 0;
  ASSERT_EQ(pthread_getschedparam(pthread_self(), &before_policy, &before), 0);
  if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &rt) != 0) {
    GTEST_SKIP() << "this user may not set SCHED_FIFO (no CAP_SYS_NICE)";
  }
  std::vector<int> policies;
  {
    auto pg = make_local_group(1, {});
    policies = policies_of_threads_named("dc-gloo-loop");
  }
  pthread_setschedparam(pthread_self(), before_policy, &before);
  EXPECT_EQ(policies, std::vector<int>{SCHED_FIFO});
}

TEST(GlooConfig, UnknownWorkerSchedulingIsRefusedWithTheChoices) {
  const std::string msg = creation_error({{"worker_sched", "fifo"}});
  EXPECT_NE(msg.find("'fifo'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("normal or batch"), std::string::npos) << msg;
  const std::string loop = creation_error({{"loop_sched", "idle"}});
  EXPECT_NE(loop.find("loop_sched='idle'"), std::string::npos) << loop;
  EXPECT_NE(loop.find("normal or batch"), std::string::npos) << loop;
}

TEST(GlooConfig, UnknownInterfaceIsRefusedByName) {
  const std::string msg = creation_error({{"ifname", "nosuchif0"}});
  EXPECT_NE(msg.find("nosuchif0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("DISTCOMM_SOCKET_IFNAME"), std::string::npos) << "the message says what to do: " << msg;
}

TEST(GlooConfig, UnresolvableMasterIsRefusedByName) {
  const std::string msg = creation_error({{"master_addr", "no-such-host.invalid"}});
  EXPECT_NE(msg.find("no-such-host.invalid"), std::string::npos) << msg;
}

// gloo itself would crash on a name that does not resolve (it walks an unset getaddrinfo
// list): the plugin refuses it first.
TEST(GlooConfig, UnresolvableHostnameIsRefusedByNameNotACrash) {
  const std::string msg = creation_error({{"hostname", "no-such-host.invalid"}});
  EXPECT_NE(msg.find("'no-such-host.invalid' does not resolve"), std::string::npos) << msg;
}

TEST(GlooRendezvous, MissingPeerTimesOutNamingIt) {
  // Rank 0 of a group of two whose rank 1 never comes: creation gives up at the group's
  // timeout (plus a few hundred ms of scheduling on a busy machine), naming rank 1.
  const auto start = std::chrono::steady_clock::now();
  std::string msg = "no Timeout";
  try {
    make_local_group(2, {}, milliseconds(1000));
  } catch (const Timeout& e) {
    msg = e.what();
  }
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_NE(msg.find("init timed out after 1."), std::string::npos) << msg;
  EXPECT_NE(msg.find("waiting for ranks [1] to arrive at the store"), std::string::npos) << msg;
  EXPECT_GE(took, milliseconds(1000));
  EXPECT_LT(took, milliseconds(1000 + 1500));
}

// Every way of choosing the interface, on a real two-rank group.
class GlooInterface : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(GlooInterface, ConnectsAndReduces) {
  testing::GroupHarnessOptions o;
  if (!GetParam().first.empty()) o.backend_config[GetParam().first] = GetParam().second;
  testing::run_group(2, "gloo", [](ProcessGroup& pg) {
    Tensor t = Tensor::of<int64_t>({pg.rank() + 1});
    pg.all_reduce(t)->wait();
    EXPECT_EQ(t.item(0), 3);
  }, o);
}

INSTANTIATE_TEST_SUITE_P(Choices, GlooInterface,
                         ::testing::Values(std::make_pair("ifname", "lo"), std::make_pair("hostname", "127.0.0.1"),
                                           std::make_pair("master_addr", "localhost"),
                                           std::make_pair("master_addr", "127.0.0.1"), std::make_pair("", "")),
                         [](const auto& info) {
                           std::string name = info.param.first.empty() ? "default" : info.param.first + "_" + info.param.second;
                           for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return name;
                         });

}  // namespace
}  // namespace distcomm
