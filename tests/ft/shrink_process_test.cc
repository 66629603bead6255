// ProcessGroup::shrink with real processes (tests/testing/multiprocess.h) over gloo, shm and auto:
// 4 ranks run an all_reduce, rank 2's process ends (_exit, no goodbye), the survivors' next
// all_reduce fails, they abort the group, shrink it without rank 2 and reduce exactly over
// the new group.
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "api/errors.h"
#include "api/plugin/plugin_registry.h"
#include "api/process_group.h"
#include "tests/testing/multiprocess.h"
#include "tests/testing/require.h"

namespace distcomm {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

void survivors_shrink_and_go_on(const std::string& backend) {
  testing::GroupHarnessOptions options;
  options.op_timeout = milliseconds(15000);  // the failed op must end well before it
  testing::run_group(4, backend, [](ProcessGroup& pg) {
    // 1, 2, 4, 8 by rank: a sum says exactly who took part.
    Tensor t = Tensor::of<float>({float(1 << pg.rank())});
    pg.all_reduce(t)->wait();
    EXPECT_EQ(t.item(0), 15.0);
    if (pg.rank() == 2) {
      pg.store()->set("test/rank2_exits", "1");
      ::_exit(0);  // gone, without a word to the others
    }
    pg.store()->wait({"test/rank2_exits"});
    const auto started = std::chrono::steady_clock::now();
    Tensor u = Tensor::of<float>({1.0f});
    EXPECT_THROW(pg.all_reduce(u)->wait(), Error) << "rank " << pg.rank() << ": an op over the dead rank ended well";
    EXPECT_LT(std::chrono::steady_clock::now() - started, seconds(12)) << "the op failed only at its timeout";
    // Aborted from two threads at once, as ft::Manager's monitor and its caller may: each
    // backend's stop must take that (shm's stall watch once joined its thread twice).
    std::thread other([&] { pg.abort(); });
    pg.abort();
    other.join();
    ProcessGroupPtr survivors = pg.shrink({2}, seconds(30));
    const int expected_rank = pg.rank() == 3 ? 2 : pg.rank();
    EXPECT_EQ(survivors->size(), 3);
    EXPECT_EQ(survivors->rank(), expected_rank);
    EXPECT_EQ(survivors->global_ranks(), (std::vector<int>{0, 1, 3}));
    Tensor v = Tensor::of<float>({float(1 << pg.rank()), 0.25f});
    survivors->all_reduce(v)->wait();
    EXPECT_EQ(v.to_doubles(), (std::vector<double>{1 + 2 + 8, 0.75})) << "rank " << pg.rank();
    survivors->barrier()->wait();
  }, options);
}

TEST(ShrinkProcesses, GlooSurvivorsOfAnExitedRankGoOn) {
  const PluginInfo& info = load_plugin("gloo");
  if (!info.available) DISTCOMM_SKIP_WITHOUT("gloo") << "the gloo backend cannot run here: " << info.unavailable_reason;
  survivors_shrink_and_go_on("gloo");
}

TEST(ShrinkProcesses, ShmSurvivorsOfAnExitedRankGoOn) {
  const PluginInfo& info = load_plugin("shm");
  ASSERT_TRUE(info.available) << info.unavailable_reason;
  survivors_shrink_and_go_on("shm");
}

// "auto" is resolved afresh for the survivors (here: shm again, all on one host); its
// candidates are asked whether they meet their peers by themselves (none does).
TEST(ShrinkProcesses, AutoSurvivorsOfAnExitedRankGoOn) {
  const PluginInfo& info = load_plugin("gloo");
  if (!info.available) DISTCOMM_SKIP_WITHOUT("gloo") << "the gloo backend cannot run here: " << info.unavailable_reason;
  survivors_shrink_and_go_on("auto");
}

}  // namespace
}  // namespace distcomm
