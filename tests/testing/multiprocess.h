// Multi-process test harness: runs the ranks of a test as real forked processes.
//
//   TEST(Gloo, AllReduce) {
//     distcomm::testing::run_group(4, "gloo", [](distcomm::ProcessGroup& pg) {
//       Tensor t = Tensor::of<float>({1.0f * pg.rank()});
//       pg.all_reduce(t)->wait();
//       EXPECT_EQ(t.item(0), 6.0);
//     });
//   }
//
// Each child runs fn and exits; a gtest failure, an exception or a crash in any child fails
// the calling test with "rank R failed: <message>" (or "rank R failed: signal SIGABRT
// (Aborted)", "rank R timed out ..."). A rank that hangs is killed at the deadline, so a test never hangs.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "api/process_group.h"

namespace distcomm {
namespace testing {

struct RunOptions {
  // Every rank must have exited by then; the ones still running are killed.
  std::chrono::seconds timeout{120};
  // Once a rank has failed, the others get this long to end on their own (they usually
  // fail fast too) before they are killed, so one failure never waits for the full timeout.
  std::chrono::seconds grace_after_failure{20};
  // Ranks that are expected to die of SIGKILL (failure tests kill a rank on purpose).
  std::set<int> may_be_killed;
};

// Forks `size` children; child r runs fn(r, size) and exits. Fails the calling gtest with
// every rank's failure, in rank order.
void run_ranks(int size, const std::function<void(int rank, int size)>& fn,
               std::chrono::seconds timeout = std::chrono::seconds(120));
void run_ranks(int size, const std::function<void(int rank, int size)>& fn, const RunOptions& options);

// A fresh folder under $TEST_TMPDIR (or /tmp) for one run's files, and its removal (the
// files in it, then the folder).
std::string make_temp_dir();
void remove_temp_dir(const std::string& dir);

enum class StoreKind {
  kFile,  // a FileStore in a fresh temporary folder
  kTcp,   // a TCPStore served by rank 0 on a free port
};

struct GroupHarnessOptions {
  StoreKind store = StoreKind::kFile;
  // The group's timeout (every op's, unless the op sets its own).
  std::chrono::milliseconds op_timeout{60000};
  std::map<std::string, std::string> backend_config;
  DebugLevel debug = DebugLevel::kOff;
  RunOptions run;
  // Simulated hosts: rank r runs with DISTCOMM_HOST_ID=host_ids[r] (process_environment.h),
  // so that "auto" and "hier" see ranks with different ids as on different hosts. Empty: unset.
  std::vector<std::string> host_ids;
};

// run_ranks, where each child first builds a store (unique to this call) and the world
// ProcessGroup of `backend` over it, then calls fn(pg). The group and the store are
// destroyed before the child exits, as a program would.
void run_group(int size, const std::string& backend, const std::function<void(ProcessGroup& pg)>& fn,
               GroupHarnessOptions options = {});

}  // namespace testing
}  // namespace distcomm
