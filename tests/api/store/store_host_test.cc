// Rank 0 serves the job's store. When it fails or reaches a deadline and exits, the other
// ranks must still report the cause -- the Timeout naming the missing or late rank, or rank
// 0's own error -- never "the server closed the connection" (a StoreError).
//
// Three ranks started by hand as a user would (tests/api/store/rank_probe.cc), over gloo, each
// printing the error it ended with. Each case failed before the store's farewell
// (api/store/internal/store_host.h) and run_main's publishing of the program's error.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "tests/api/store/hand_started_job.h"

namespace distcomm {
namespace {

using namespace std::chrono_literals;
using testing::Finished;
using testing::Subprocess;

const std::string kProbe = testing::runfile("tests/api/store/rank_probe");

// Three ranks of rank_probe started by hand; each one's output shown when it ends.
class Job {
 public:
  Subprocess& start(int r, const std::vector<std::string>& args) {
    std::vector<std::string> argv = {kProbe};
    argv.insert(argv.end(), args.begin(), args.end());
    ranks_[r] = job_.start(r, argv, {"DISTCOMM_INIT_REPORT_SECONDS=0.5"});
    return *ranks_[r];
  }

  Finished finish(int r) {
    Finished f = ranks_[r]->finish(60s);
    std::fprintf(stderr, "--- rank %d (exit %d):\n%s", r, testing::exit_code(f), f.out.c_str());
    return f;
  }

 private:
  const testing::HandStartedJob job_{3};
  std::unique_ptr<Subprocess> ranks_[3];
};

// The line a rank printed about the error it ended with.
std::string caught(const Finished& f, int r) {
  const std::string head = "rank " + std::to_string(r) + " caught ";
  const size_t at = f.out.find(head);
  if (at == std::string::npos) return "";
  return f.out.substr(at, f.out.find('\n', at) - at);
}

// Never the store's own failure where a rank's is the cause.
void expect_no_store_error(const Finished& f) {
  EXPECT_EQ(f.out.find("StoreError"), std::string::npos) << f.out;
  EXPECT_EQ(f.out.find("closed the connection"), std::string::npos) << f.out;
}

// Rank r ended with the Timeout (never a StoreError) and its message names `named`.
void expect_timeout_naming(const Finished& f, int r, const std::string& named) {
  EXPECT_EQ(testing::exit_code(f), 1) << r;
  const std::string line = caught(f, r);
  EXPECT_EQ(line.rfind("rank " + std::to_string(r) + " caught distcomm::Timeout: ", 0), 0u) << f.out;
  EXPECT_NE(line.find(named), std::string::npos) << f.out;
  expect_no_store_error(f);
}

TEST(StoreHost, ARankThatNeverStartsIsNamedByEveryRankAfterRankZeroLeaves) {
  Job job;
  Subprocess& r0 = job.start(0, {"init"});
  // Rank 2 starts once rank 0 has waited half a second: its own deadline comes after rank
  // 0 has given up and left, taking the store with it.
  ASSERT_TRUE(r0.wait_for_stdout("for ranks [1, 2] to arrive at the store", 1, 30s));
  job.start(2, {"init"});
  const Finished f0 = job.finish(0);
  const Finished f2 = job.finish(2);
  expect_timeout_naming(f0, 0, "waiting for ranks [1] to arrive at the store");
  expect_timeout_naming(f2, 2, "waiting for ranks [1] to arrive at the store");
  // Rank 2 ends with rank 0's Timeout, before its own deadline.
  EXPECT_NE(caught(f2, 2).find("init gave up waiting for ranks [1] to arrive at the store"), std::string::npos)
      << f2.out;
  EXPECT_NE(caught(f2, 2).find("the group's creation failed on rank 0: rank 0/3 group 'world': init timed out after"),
            std::string::npos)
      << f2.out;
}

// Rank 1 waits 1.5 s of its 3 s for rank 0's store, then for rank 2, which never comes:
// its Timeout says how long init waited in all, not since the store answered ("init timed
// out after 1.5 s (the group's timeout is 3.0 s)" was said after 3 s).
TEST(StoreHost, AnInitTimeoutCountsTheWaitForTheStore) {
  Job job;
  job.start(1, {"init"});
  std::this_thread::sleep_for(1500ms);
  job.start(0, {"init"});
  const Finished f1 = job.finish(1);
  const Finished f0 = job.finish(0);
  const std::string line = caught(f1, 1);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(line, m, std::regex(R"(init timed out after (\d+\.\d) s \(the group's timeout is 3\.0 s\))")))
      << f1.out;
  EXPECT_GE(std::stod(m[1]), 2.9) << line;
}

TEST(StoreHost, ASkippedAllReduceIsATimeoutNamingTheRankThatSkippedIt) {
  Job job;
  const std::string gate = testing::temp_path("skip_gate");
  for (int r : {0, 1, 2}) job.start(r, {"skip", gate});
  const Finished f0 = job.finish(0);
  const Finished f2 = job.finish(2);
  std::ofstream(gate) << "open";  // rank 1, which stayed out of the op, may go now
  const Finished f1 = job.finish(1);
  expect_timeout_naming(f0, 0, "rank 1 has not issued #2 yet");
  expect_timeout_naming(f2, 2, "rank 1 has not issued #2 yet");
  EXPECT_NE(f1.out.find("rank 1 skipped all_reduce #2"), std::string::npos) << f1.out;
  std::remove(gate.c_str());
}

TEST(StoreHost, RankZerosOwnErrorIsWhatTheOthersReport) {
  Job job;
  for (int r : {0, 1, 2}) job.start(r, {"throw"});
  const Finished f0 = job.finish(0);
  EXPECT_EQ(testing::exit_code(f0), 1);
  EXPECT_NE(f0.out.find("rank_probe: rank 0 found a corrupt batch"), std::string::npos) << f0.out;
  for (int r : {1, 2}) {
    const Finished f = job.finish(r);
    EXPECT_EQ(testing::exit_code(f), 1) << r;
    const std::string line = caught(f, r);
    EXPECT_EQ(line.rfind("rank " + std::to_string(r) + " caught distcomm::PeerFailure: ", 0), 0u) << f.out;
    EXPECT_NE(line.find("rank 0 of the group failed and aborted the group, which cut this op off. Its error: rank "
                        "0/3 group 'world': its program ended with an error: rank 0 found a corrupt batch"),
              std::string::npos)
        << f.out;
    expect_no_store_error(f);
  }
}

}  // namespace
}  // namespace distcomm
