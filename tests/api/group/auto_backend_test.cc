// The rule behind backend "auto" (api/group/auto_backend.h), and the spec parsing that routes it.
#include "api/group/auto_backend.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "api/errors.h"
#include "api/group/host_layout.h"
#include "api/plugin/plugin_registry.h"
#include "api/process_group.h"

namespace distcomm {
namespace {

TEST(AutoBackend, ShmOnlyWhenEveryRankSharesTheDomainAndCanRunShm) {
  const std::string here = "boot-a pid:[1] shm";
  EXPECT_EQ(choose_auto_cpu_backend({here}), "shm");
  EXPECT_EQ(choose_auto_cpu_backend({here, here, here}), "shm");
  EXPECT_EQ(choose_auto_cpu_backend({here, "boot-b pid:[1] shm"}), "gloo") << "another host";
  EXPECT_EQ(choose_auto_cpu_backend({here, "boot-a pid:[2] shm"}), "gloo") << "another PID namespace";
  EXPECT_EQ(choose_auto_cpu_backend({here, "boot-a pid:[1]"}), "gloo") << "a rank without the shm plugin";
  EXPECT_EQ(choose_auto_cpu_backend({"boot-a pid:[1]", "boot-a pid:[1]"}), "gloo") << "no rank has it";
  const std::string there = "boot-b pid:[1] shm";
  EXPECT_EQ(choose_auto_cpu_backend({here, here, there, there}), "hier") << "two hosts, two ranks each";
  EXPECT_EQ(choose_auto_cpu_backend({here, here, there}), "hier") << "two hosts, 2 + 1 ranks";
  EXPECT_EQ(choose_auto_cpu_backend({here, "boot-a pid:[1]", there, there}), "gloo") << "a rank without shm";
}

TEST(AutoBackend, TheHierarchyNeedsTwoHostsOneWithTwoRanksAndShmEverywhere) {
  const std::string a = "boot-a pid:[1] shm", b = "boot-b pid:[1] shm";
  EXPECT_EQ(why_not_hierarchical({a, a, b, b}), "");
  EXPECT_EQ(why_not_hierarchical({a, a, a, b}), "");
  EXPECT_EQ(why_not_hierarchical({a, a}), "one host");
  EXPECT_EQ(why_not_hierarchical({a, b}), "one rank per host");
  EXPECT_EQ(why_not_hierarchical({a, a, "boot-b pid:[1]", b}), "rank 2 cannot run shm");
}

TEST(AutoBackend, AHostIdSeparatesRanksOfOneKernel) {
  const PluginSearch plugins = PluginSearch::from_environment();
  const std::string x = auto_backend_placement(plugins, "x"), y = auto_backend_placement(plugins, "y");
  EXPECT_NE(x, y);
  EXPECT_EQ(x, auto_backend_placement(plugins, "x"));
  EXPECT_EQ(HostLayout::from_placements({x, y, x, y, x}).describe(), "2 hosts (3 + 2 ranks)");
}

TEST(HostLayout, HostsInOrderOfTheirLowestRankAndGroupsAcrossByLocalRank) {
  const HostLayout layout = HostLayout::from_placements({"b", "a", "b", "a", "b"});
  EXPECT_EQ(layout.hosts, (std::vector<std::vector<int>>{{0, 2, 4}, {1, 3}}));
  EXPECT_EQ(layout.host_of, (std::vector<int>{0, 1, 0, 1, 0}));
  EXPECT_EQ(layout.local_rank_of, (std::vector<int>{0, 0, 1, 1, 2}));
  EXPECT_FALSE(layout.even());
  EXPECT_EQ(layout.across_hosts(), (std::vector<std::vector<int>>{{0, 1}, {2, 3}, {4}}));
  EXPECT_TRUE(HostLayout::from_placements({"a", "a", "b", "b"}).even());
  EXPECT_EQ(HostLayout::from_placements({"a", "a", "b", "b"}).describe(), "2 hosts x 2 ranks");
}

// Users of one machine are different hosts to auto (shm cannot join them), and the
// description says that they share a machine rather than claim 2 hosts.
TEST(HostLayout, UsersOfOneMachineAreHostsOfOneMachine) {
  const std::string root = "boot-a pid:[1] uid 0 shm", nobody = "boot-a pid:[1] uid 65534 shm";
  const std::string other = "boot-b pid:[1] uid 0 shm";
  EXPECT_EQ(machine_of_placement(root), machine_of_placement(nobody));
  EXPECT_NE(machine_of_placement(root), machine_of_placement(other));
  EXPECT_EQ(machine_of_placement("boot-a pid:[1] uid 12"), "boot-a pid:[1]");
  const HostLayout users = HostLayout::from_placements({root, root, nobody, nobody});
  EXPECT_EQ(users.hosts.size(), 2u);
  EXPECT_EQ(users.describe(), "2 hosts x 2 ranks (users of 1 machine)");
  EXPECT_EQ(HostLayout::from_placements({root, nobody, other}).describe(),
            "3 hosts x 1 ranks (users of 2 machines)");
  EXPECT_EQ(HostLayout::from_placements({root, root, other}).describe(), "2 hosts (2 + 1 ranks)");
}

TEST(AutoBackend, ThisProcessHasADomain) {
  const std::string domain = shared_memory_domain();
  EXPECT_NE(domain.find("pid:["), std::string::npos) << domain;
  EXPECT_EQ(auto_backend_placement(PluginSearch::from_environment()).rfind(domain, 0), 0u) << "the placement starts with the domain";
}

TEST(AutoBackend, SpecRoutesCpuToAuto) {
  EXPECT_EQ(BackendSpec::parse("auto").by_device.at(DeviceType::kCPU), "auto");
  EXPECT_EQ(BackendSpec::parse("auto").by_device.count(DeviceType::kCUDA), 0u);
  EXPECT_EQ(BackendSpec::parse("hier").by_device.at(DeviceType::kCPU), "hier");
  const BackendSpec mixed = BackendSpec::parse("cpu:auto,cuda:nccl");
  EXPECT_EQ(mixed.by_device.at(DeviceType::kCPU), "auto");
  EXPECT_EQ(mixed.by_device.at(DeviceType::kCUDA), "nccl");
}

// mpi's settings are taken by a hierarchy that may go over mpi, but only where its plugin
// loads: this test has no plugins, and init of "auto" under mpirun must not fail for that.
TEST(AutoBackend, MpiSettingsOnlyWhereTheMpiPluginLoads) {
  const PluginSearch none;  // this test's runfiles carry no plugin
  ASSERT_THROW(load_plugin("mpi", none), BackendUnavailable);
  const std::map<std::string, std::string> config = {{"hier_across", "auto"}, {"launcher", "mpirun"}};
  std::vector<std::string> names;
  ASSERT_NO_THROW(names = BackendSpec::parse("auto").names_taking_settings(none, config));
  EXPECT_EQ(std::count(names.begin(), names.end(), "mpi"), 0);
  EXPECT_EQ(BackendSpec::parse("gloo").names_taking_settings(none, config), (std::vector<std::string>{"gloo"}));
}

// What the ranks exchanged, taken apart: the CPU rule compares what comes before '|';
// nccl joins "auto" only when every rank reported it.
TEST(AutoBackend, NcclJoinsOnlyWhenEveryRankCanRunIt) {
  const std::string a = "boot-a pid:[1] shm";
  const ExchangedPlacements both = split_placements({a + "|nccl", a + "|nccl"});
  EXPECT_EQ(both.cpu, (std::vector<std::string>{a, a}));
  EXPECT_TRUE(both.all_run_nccl);
  EXPECT_EQ(choose_auto_cpu_backend(both.cpu), "shm") << "the nccl part does not split a host";
  EXPECT_FALSE(split_placements({a + "|nccl", a}).all_run_nccl) << "a rank without a GPU";
  EXPECT_FALSE(split_placements({a, a}).all_run_nccl);
  EXPECT_FALSE(split_placements({a + "|nccl", a + "|nccx"}).all_run_nccl);
  EXPECT_FALSE(split_placements({}).all_run_nccl);
}

// mpi across hosts: the '|mpi' part (a rank mpirun started, whose mpi plugin runs) comes
// off before the CPU rule compares, and hier_across picks from every rank's.
TEST(AutoBackend, MpiAcrossHostsOnlyWhereEveryRankRunsIt) {
  const std::string a = "boot-a pid:[1] shm", b = "boot-b pid:[1] shm";
  const ExchangedPlacements all = split_placements({a + "|mpi", a + "|mpi|nccl", b + "|mpi", b + "|mpi"});
  EXPECT_EQ(all.cpu, (std::vector<std::string>{a, a, b, b}));
  EXPECT_EQ(all.runs_mpi, (std::vector<bool>{true, true, true, true}));
  EXPECT_EQ(choose_auto_cpu_backend(all.cpu), "hier") << "the mpi part does not split a host";
  EXPECT_EQ(choose_across_backend("r", "auto", all), "mpi");
  EXPECT_EQ(choose_across_backend("r", "gloo", all), "gloo");
  EXPECT_EQ(choose_across_backend("r", "mpi", all), "mpi");
  const ExchangedPlacements one_without = split_placements({a + "|mpi", a + "|mpi", b, b + "|mpi"});
  EXPECT_EQ(choose_across_backend("r", "auto", one_without), "gloo");
  try {
    choose_across_backend("r", "mpi", one_without);
    ADD_FAILURE() << "hier_across=mpi with rank 2 unable to run it was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("rank 2 cannot run mpi"), std::string::npos) << e.what();
  }
  EXPECT_THROW(choose_across_backend("r", "ucx", all), InvalidArgument);
  EXPECT_EQ(choose_across_backend("r", "auto", split_placements({})), "gloo");
}

// Ranks that disagree on hier_across would otherwise pick different backends across hosts
// (or blame a rank for not running mpi when it was never asked to): every rank sees every
// rank's setting in the placements and refuses with the same message naming who said what.
TEST(AutoBackend, RanksThatDisagreeOnHierAcrossAreNamed) {
  const std::string a = "boot-a pid:[1] shm", b = "boot-b pid:[1] shm";
  const ExchangedPlacements split =
      split_placements({a + "|across=mpi|mpi", a + "|across=mpi|mpi|nccl", b + "|across=mpi|mpi", b + "|across=gloo"});
  EXPECT_EQ(split.cpu, (std::vector<std::string>{a, a, b, b})) << "the setting does not split a host";
  EXPECT_EQ(split.hier_across, (std::vector<std::string>{"mpi", "mpi", "mpi", "gloo"}));
  EXPECT_EQ(split.runs_mpi, (std::vector<bool>{true, true, true, false}));
  try {
    choose_across_backend("rank 0/4 group 'world'", "mpi", split);
    ADD_FAILURE() << "a disagreement on hier_across was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(),
                 "rank 0/4 group 'world': the ranks disagree on backend setting 'hier_across' (DISTCOMM_HIER_ACROSS): "
                 "gloo on ranks [3], mpi on ranks [0, 1, 2]; give every rank the same");
  }
  const ExchangedPlacements agreed = split_placements({a + "|across=auto|mpi", b + "|across=auto|mpi"});
  EXPECT_EQ(choose_across_backend("r", "auto", agreed), "mpi");
  PluginSearch plugins = PluginSearch::from_environment();
  EXPECT_EQ(split_placements({auto_backend_placement(plugins, "x", false, false, "gloo")}).hier_across,
            (std::vector<std::string>{"gloo"}));
}

// The decision and the name it gives, as group creation applies them.
TEST(AutoBackend, OnlyAutoAloneAddsNcclAndSaysSo) {
  const std::string a = "boot-a pid:[1] shm", b = "boot-b pid:[1] shm";
  const ExchangedPlacements gpus = split_placements({a + "|nccl", a + "|nccl"});
  const AutoChoice both = choose_auto("auto", false, gpus);
  EXPECT_EQ(both.cpu, "shm");
  EXPECT_TRUE(both.with_nccl);
  EXPECT_EQ(both.label, " (cpu: shm, cuda: nccl)");
  EXPECT_FALSE(choose_auto("cpu:auto", false, gpus).with_nccl) << "cpu:auto never adds it";
  EXPECT_FALSE(choose_auto("cpu:auto,cuda:nccl", true, gpus).with_nccl) << "the spec has its own CUDA backend";
  const AutoChoice cpu_only = choose_auto("auto", false, split_placements({a, a}));
  EXPECT_FALSE(cpu_only.with_nccl);
  EXPECT_EQ(cpu_only.label, " (cpu: shm)");
  const AutoChoice across = choose_auto("auto", false, split_placements({a + "|nccl", a + "|nccl", b + "|nccl", b + "|nccl"}));
  EXPECT_EQ(across.cpu, "hier");
  EXPECT_EQ(across.label, " (cuda: nccl)") << "the hierarchy names its own part once built";
  EXPECT_EQ(choose_auto("auto", false, split_placements({a, "boot-b pid:[1]"})).label, " (cpu: gloo)");
}

// Without a GPU device node, nccl is neither loaded nor offered (this machine has none;
// on one with a GPU the placement ends with "|nccl" where the plugin can run).
TEST(AutoBackend, WithoutAGpuNcclIsNotAsked) {
  const PluginSearch plugins = PluginSearch::from_environment();
  if (cuda_device_node_present()) GTEST_SKIP() << "this machine has a GPU device node";
  EXPECT_EQ(auto_backend_placement(plugins, "", /*ask_nccl=*/true).find('|'), std::string::npos);
  const auto names = auto_backend_candidates(plugins, /*with_nccl=*/true);
  EXPECT_EQ(std::count(names.begin(), names.end(), "nccl"), 0);
}

}  // namespace
}  // namespace distcomm
