// What a rank that waits long in an shm op costs the cores beside it. The waiting thread
// polls every op itself (and sleeps on a futex once spinning stops paying), so the group's
// progress thread has nothing to do meanwhile: it used to wake every shm_nap_us (1 ms) for
// the whole wait all the same -- ~3% of a core per waiting rank, two thirds of a core with
// 32 ranks on 2 cores (an outside measurement). Counted here as the progress thread's
// voluntary context switches (its wake-ups), which a loaded machine can only make fewer.
#include <dirent.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace {

// The voluntary context switches of this process's thread named `name`; -1: none such.
long voluntary_switches_of(const std::string& name) {
  DIR* tasks = ::opendir("/proc/self/task");
  if (tasks == nullptr) return -1;
  long found = -1;
  while (const dirent* e = ::readdir(tasks)) {
    if (e->d_name[0] == '.') continue;
    const std::string dir = std::string("/proc/self/task/") + e->d_name;
    std::string comm;
    std::getline(std::ifstream(dir + "/comm"), comm);
    if (comm != name) continue;
    std::ifstream status(dir + "/status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("voluntary_ctxt_switches:", 0) == 0) found = std::stol(line.substr(24));
    }
  }
  ::closedir(tasks);
  return found;
}

TEST(ShmWaitingCost, TheProgressThreadSleepsWhileARankWaitsLong) {
  constexpr auto kLate = std::chrono::milliseconds(2000);
  testing::run_group(2, "shm", [&](ProcessGroup& pg) {
    pg.barrier()->wait();
    if (pg.rank() == 0) {
      std::this_thread::sleep_for(kLate);
      pg.barrier()->wait();
      return;
    }
    const long before = voluntary_switches_of("dc-shm-progress");
    ASSERT_GE(before, 0) << "no thread named dc-shm-progress in this rank";
    pg.barrier()->wait();  // rank 1 waits here about kLate
    const long woke = voluntary_switches_of("dc-shm-progress") - before;
    // At one nap a millisecond that was ~2000; parked after 10 naps, woken by the watch
    // every 500 ms and once as the wait ends: a handful. 200 leaves room for any scheduler.
    EXPECT_LT(woke, 200) << "the progress thread woke " << woke << " times during a " << kLate.count()
                         << " ms wait";
  });
}

}  // namespace
}  // namespace distcomm
