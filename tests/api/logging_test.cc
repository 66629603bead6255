// Ordered output: four real processes post their lines in reverse order of time, and
// rank 0 still prints them in rank order.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "api/errors.h"
#include "api/store/file_store.h"
#include "api/logging.h"
#include "api/process_group.h"
#include "tests/api/plugin_test_env.h"
#include "tests/testing/captured_stderr.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace {

using testing::stderr_of;

TEST(Logging, PrefixCarriesRankAndWorld) {
  EXPECT_EQ(log_prefix(), "");
  set_log_identity(2, 8);
  EXPECT_EQ(log_prefix(), "[rank 2/8] ");
  set_log_identity(-1, -1);
}

TEST(Logging, LogLinePrefixesEveryLineOfItsText) {
  set_log_identity(1, 4);
  EXPECT_EQ(stderr_of([] { log_line("one\ntwo\n"); }), "[rank 1/4] one\n[rank 1/4] two\n");
  EXPECT_EQ(stderr_of([] { log_with_mode(LogMode::kEveryRank, nullptr, "x"); }), "[rank 1/4] x\n");
  set_log_identity(-1, -1);
  EXPECT_EQ(stderr_of([] { log_line("before init"); }), "before init\n");
}

TEST(Logging, OnlyRankZeroLogsInRankZeroMode) {
  set_log_identity(1, 4);
  EXPECT_EQ(stderr_of([] { log_rank_zero("quiet"); }), "");
  EXPECT_EQ(stderr_of([] { log_with_mode(LogMode::kRankZero, nullptr, "quiet"); }), "");
  set_log_identity(0, 4);
  EXPECT_EQ(stderr_of([] { log_rank_zero("loud"); }), "[rank 0/4] loud\n");
  EXPECT_EQ(stderr_of([] { log_with_mode(LogMode::kRankZero, nullptr, "loud"); }), "[rank 0/4] loud\n");
  try {
    log_with_mode(LogMode::kOrdered, nullptr, "x");
    ADD_FAILURE() << "ordered logging without a group";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()), "log_with_mode: ordered logging needs a process group");
  }
  set_log_identity(-1, -1);
}

// Through the group's host exchange (both of its transports: group/host_exchange_test.cc; MPI's
// in the mpi examples test), with a backend that implements no op at all.
TEST(OrderedPrint, ComesOutInRankOrder) {
  use_test_plugins();
  char dir[] = "/tmp/distcomm_logging_test_XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string store_path = std::string(dir) + "/store";
  const std::string out_path = std::string(dir) + "/out";
  const int world = 4;
  testing::run_ranks(world, [&](int r, int) {
    if (r == 0) {
      const int fd = ::open(out_path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
      ::dup2(fd, STDOUT_FILENO);
    }
    ProcessGroupOptions o;
    o.store = std::make_shared<FileStore>(store_path, world);
    o.rank = r;
    o.size = world;
    o.backend = "any_size";
    auto pg = ProcessGroup::create(o);
    // The highest rank speaks first: arrival order is the reverse of rank order.
    std::this_thread::sleep_for(std::chrono::milliseconds(40 * (world - r)));
    ordered_print(*pg, "hello from " + std::to_string(r) + "\nsecond line " + std::to_string(r));
    // A subgroup's ordered print, made by its members only, must not shift the world's
    // next one.
    auto low = pg->new_group({0, 1});
    if (low) ordered_print(*low, "low " + std::to_string(r), /*prefix=*/false);
    ordered_print(*pg, "again " + std::to_string(r), /*prefix=*/false);
  }, std::chrono::seconds(60));
  if (::testing::Test::HasFailure()) return;
  std::ifstream in(out_path);
  std::stringstream got;
  got << in.rdbuf();
  std::string expected;
  for (int r = 0; r < world; ++r) {
    expected += "[rank " + std::to_string(r) + "/4] hello from " + std::to_string(r) + "\n";
    expected += "[rank " + std::to_string(r) + "/4] second line " + std::to_string(r) + "\n";
  }
  expected += "low 0\nlow 1\n";
  for (int r = 0; r < world; ++r) expected += "again " + std::to_string(r) + "\n";
  EXPECT_EQ(got.str(), expected);
}

// A rank's ordered_print that pairs with another rank's ordered log line (DDP's, with
// log_every_n set on that rank only) is a Desync naming both on rank 0, which prints:
// helper-72's rank 0 printed rank 1's DDP statistics in place of rank 1's own line.
TEST(OrderedPrint, PairedWithAnotherRanksLogLineIsADesync) {
  use_test_plugins();
  char dir[] = "/tmp/distcomm_logging_test_XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string store_path = std::string(dir) + "/store";
  testing::run_ranks(2, [&](int r, int size) {
    ProcessGroupOptions o;
    o.store = std::make_shared<FileStore>(store_path, size);
    o.rank = r;
    o.size = size;
    o.backend = "any_size";
    auto pg = ProcessGroup::create(o);
    if (r == 1) {
      log_with_mode(LogMode::kOrdered, pg.get(), "DDP iteration 1: ...");
      return;
    }
    try {
      ordered_print(*pg, "my own line");
      ADD_FAILURE() << "rank 0's ordered_print took rank 1's log line";
    } catch (const Desync& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("rank 0: ordered_print; rank 1: an ordered log line"), std::string::npos) << msg;
    }
  }, std::chrono::seconds(60));
}

}  // namespace
}  // namespace distcomm
