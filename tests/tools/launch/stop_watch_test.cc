// The line a launcher says about its own stop (SIGSTOP/SIGCONT, a freeze). Only node 0's
// launcher of a static job serves the job's store; a probe found node 1's launcher saying
// "the job's store it serves did not answer meanwhile" of a store that was node 0's.
#include "tools/launch/stop_watch.h"

#include <gtest/gtest.h>

namespace distcomm {
namespace launch {
namespace {

LauncherStop a_stop() {
  LauncherStop s;
  s.began = std::chrono::steady_clock::time_point();
  s.ended = s.began + std::chrono::seconds(25);
  s.sigcont = true;
  return s;
}

TEST(StopWatch, OnlyNodeZerosLauncherServesTheStore) {
  EXPECT_EQ(store_role(true, 0), StoreRole::kServes);
  EXPECT_EQ(store_role(true, 1), StoreRole::kNodeZeroServes);
  EXPECT_EQ(store_role(false, 0), StoreRole::kRanksServe);
  EXPECT_EQ(store_role(false, 3), StoreRole::kRanksServe);
}

TEST(StopWatch, TheLineClaimsTheStoreOnlyWhereItIsServed) {
  EXPECT_EQ(stop_text(a_stop(), StoreRole::kServes),
            "the launcher itself was stopped for 25 s (SIGSTOP/SIGCONT), and the job's store it serves did not "
            "answer meanwhile");
  const std::string other = stop_text(a_stop(), store_role(true, 1));
  EXPECT_EQ(other.find("it serves"), std::string::npos) << other;
  EXPECT_EQ(other.rfind("the launcher itself was stopped for 25 s (SIGSTOP/SIGCONT), and did not watch its ranks "
                        "meanwhile (if they were stopped too, the job's store on node 0 ",
                        0),
            0u)
      << other;
  EXPECT_EQ(stop_text(a_stop(), StoreRole::kRanksServe),
            "the launcher itself was stopped for 25 s (SIGSTOP/SIGCONT), and did not watch its ranks meanwhile");
}

}  // namespace
}  // namespace launch
}  // namespace distcomm
