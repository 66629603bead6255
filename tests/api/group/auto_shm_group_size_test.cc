// "auto" judges whether shm fits this process's file size limit (ulimit -f, RLIMIT_FSIZE)
// for the group being created: its size and its shm settings. A rank's segment (a memfd) grows
// with the group (4,468,736 bytes for 2 ranks, 4,739,072 for 4, default settings); the check
// sized a two-rank group whatever the group, so under a limit between the two a 4-rank job
// picked shm and died at creation ("this rank's segment needs 4739072 bytes, over this
// process's file size limit") instead of running gloo with a warning. Real forked ranks; the
// limit is lowered in the test process before they are forked (they inherit it) and raised
// back after. Across hosts (DISTCOMM_HOST_ID, simulated) the group becomes the hierarchy,
// whose shm level holds one host's ranks: the segment is judged for as many as the launcher
// says run on this host (local_world_size), not for the whole group.
#include <sys/resource.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "api/group/auto_backend.h"
#include "api/group/auto_shm_fit.h"
#include "api/plugin/plugin_registry.h"
#include "api/process_group.h"
#include "tests/testing/captured_stderr.h"
#include "tests/testing/child_output.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace {

// Between the two-rank segment (4,468,736 bytes) and the four-rank one (4,739,072).
constexpr rlim_t kBetween = 4400 * 1024;
// Below both.
constexpr rlim_t kBelowBoth = 2048 * 1024;

// Lowers this process's soft file size limit for the scope (children forked meanwhile
// inherit it) and puts the old one back.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &old_);
    rlimit lowered = old_;
    lowered.rlim_cur = bytes;
    set_ = ::setrlimit(RLIMIT_FSIZE, &lowered) == 0;
  }
  ~FileSizeLimit() { ::setrlimit(RLIMIT_FSIZE, &old_); }
  bool set() const { return set_; }

 private:
  rlimit old_{};
  bool set_ = false;
};

// Every rank adds rank + 1: the sum is exact in float.
void expect_exact_all_reduce(ProcessGroup& pg) {
  Tensor t = Tensor::of({static_cast<float>(pg.rank() + 1)});
  pg.all_reduce(t)->wait();
  EXPECT_EQ(t.item(), pg.size() * (pg.size() + 1) / 2.0);
}

void expect_backend(int size, const std::string& expected, const std::map<std::string, std::string>& config = {},
                    const std::vector<std::string>& host_ids = {}) {
  testing::GroupHarnessOptions o;
  o.backend_config = config;
  o.host_ids = host_ids;
  testing::run_group(
      size, "auto",
      [&](ProcessGroup& pg) {
        EXPECT_EQ(pg.backend_name().rfind(expected, 0), 0u) << pg.backend_name();
        expect_exact_all_reduce(pg);
      },
      o);
}

TEST(AutoShmGroupSize, FourRanksUnderALimitBetweenTwoAndFourRanksSegmentsRunGloo) {
  const FileSizeLimit limit(kBetween);
  ASSERT_TRUE(limit.set());
  expect_backend(4, "auto (cpu: gloo)");
}

TEST(AutoShmGroupSize, TwoRanksUnderThatLimitStillRunShm) {
  const FileSizeLimit limit(kBetween);
  ASSERT_TRUE(limit.set());
  expect_backend(2, "auto (cpu: shm)");
}

// The settings in effect count too: twice the slots make the two-rank segment about 8.6 MB.
TEST(AutoShmGroupSize, TwoRanksWithMoreSlotsUnderThatLimitRunGloo) {
  const FileSizeLimit limit(kBetween);
  ASSERT_TRUE(limit.set());
  expect_backend(2, "auto (cpu: gloo)", {{"shm_slots", "8"}});
}

TEST(AutoShmGroupSize, FourRanksUnderALimitBelowBothRunGloo) {
  const FileSizeLimit limit(kBelowBoth);
  ASSERT_TRUE(limit.set());
  expect_backend(4, "auto (cpu: gloo)");
}

TEST(AutoShmGroupSize, FourRanksWithoutALimitRunShm) {
  rlimit rl{};
  ::getrlimit(RLIMIT_FSIZE, &rl);
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < 16u << 20) GTEST_SKIP() << "this process runs under ulimit -f";
  expect_backend(4, "auto (cpu: shm)");
}

// Two simulated hosts of two ranks, as a launcher starts them (local_world_size: init fills it
// from LOCAL_WORLD_SIZE): auto builds the hierarchy, whose shm level is a host's two ranks,
// and their segments fit. Judged for the whole group of four, every rank dropped shm and the
// job ran flat on gloo.
TEST(AutoShmGroupSize, TwoHostsOfTwoRanksUnderThatLimitBuildTheHierarchy) {
  const FileSizeLimit limit(kBetween);
  ASSERT_TRUE(limit.set());
  expect_backend(4, "auto (cpu: shm within hosts, gloo across; 2 hosts x 2 ranks)", {{"local_world_size", "2"}},
                 {"hostA", "hostA", "hostB", "hostB"});
}

// Without the launcher's count, auto judges the whole group (it may be one host's, all shm).
TEST(AutoShmGroupSize, TheSizeJudgedIsTheLaunchersLocalWorldSizeAtMost) {
  EXPECT_EQ(shm_ranks_to_judge("auto", 8, 4), 4);
  EXPECT_EQ(shm_ranks_to_judge("auto", 8, 0), 8);
  EXPECT_EQ(shm_ranks_to_judge("auto", 3, 8), 3);  // a subgroup holds at most its own size
  EXPECT_EQ(shm_ranks_to_judge("hier", 8, 4), 4);
  EXPECT_EQ(shm_ranks_to_judge("hier", 8, -1), 0);  // unknown: a group of two, as before
}

// auto_backend_placement is part of the plugin ABI (auto_backend.h is a public header): a
// plugin or program built against the header with these five parameters must still find it
// in libdistcomm.so (a parameter added to it, even defaulted, renames the symbol: "undefined
// symbol" at load). Its meaning stays: shm judged for a group of two.
TEST(AutoShmGroupSize, TheFiveParameterPlacementOfThePluginAbiStays) {
  using FiveParameters =
      std::string (*)(const PluginSearch&, const std::string&, bool, bool, const std::string&);
  const FiveParameters placement = &auto_backend_placement;
  const std::string said = testing::child_output([placement] {
    rlimit rl{};
    ::getrlimit(RLIMIT_FSIZE, &rl);
    rl.rlim_cur = kBetween;
    ::setrlimit(RLIMIT_FSIZE, &rl);
    const std::string p = placement(PluginSearch::from_environment(), "", false, false, "");
    return std::string(p.size() >= 4 && p.compare(p.size() - 4, 4, " shm") == 0 ? "(shm)" : "(no shm)") + p;
  });
  EXPECT_EQ(said.rfind("(shm)", 0), 0u) << said;
}

// The placement a rank publishes, and the warning: the group's size, the bytes and ulimit -f.
TEST(AutoShmGroupSize, ThePlacementAndTheWarningNameTheGroupSize) {
  const std::string said = testing::child_output([] {
    rlimit rl{};
    ::getrlimit(RLIMIT_FSIZE, &rl);
    rl.rlim_cur = kBetween;
    ::setrlimit(RLIMIT_FSIZE, &rl);
    testing::CapturedStderr captured;
    const PluginSearch plugins = PluginSearch::from_environment();
    const std::string four = auto_backend_placement_for_group(plugins, "", false, false, "", 4, {});
    const std::string two = auto_backend_placement_for_group(plugins, "", false, false, "", 2, {});
    auto has_shm = [](const std::string& p) { return p.size() >= 4 && p.compare(p.size() - 4, 4, " shm") == 0; };
    return std::string(has_shm(four) ? "(shm for 4)" : "") + (has_shm(two) ? "(shm for 2)" : "") + captured.text();
  });
  EXPECT_EQ(said.find("(shm for 4)"), std::string::npos) << said;
  EXPECT_NE(said.find("(shm for 2)"), std::string::npos) << said;
  EXPECT_NE(said.find("warning: auto: shm cannot run here, so ranks of one host use gloo"), std::string::npos) << said;
  EXPECT_NE(said.find("a rank's segment (4 ranks, this group's shm settings) needs 4739072 bytes"), std::string::npos)
      << said;
  EXPECT_NE(said.find("ulimit -f"), std::string::npos) << said;
}

}  // namespace
}  // namespace distcomm
