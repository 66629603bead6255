// Who runs a gloo group's collectives (backends/gloo/gloo_worker.h): the thread that waits
// for an op runs it, the worker runs what nobody waits for, in issue order either way, and
// a failure or an abort still ends every op.
#include <dirent.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "api/errors.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using testing::run_group;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Context switches of the group's worker thread so far (it sleeps in each one it makes).
long worker_switches() {
  long total = -1;
  DIR* tasks = opendir("/proc/self/task");
  if (!tasks) return total;
  while (dirent* e = readdir(tasks)) {
    if (e->d_name[0] == '.') continue;
    const std::string dir = std::string("/proc/self/task/") + e->d_name;
    std::string comm;
    std::getline(std::ifstream(dir + "/comm"), comm);
    if (comm != "dc-gloo-worker") continue;
    std::ifstream status(dir + "/status");
    total = 0;
    for (std::string line; std::getline(status, line);) {
      if (line.find("ctxt_switches:") != std::string::npos) total += std::stol(line.substr(line.find(':') + 1));
    }
  }
  closedir(tasks);
  return total;
}

// Ranks tell each other where they are through the store.
void mark(ProcessGroup& pg, const std::string& what) { pg.store()->set("test/" + what, "1"); }
void wait_for(ProcessGroup& pg, const std::string& what) { pg.store()->wait({"test/" + what}, milliseconds(60000)); }

// The fewest context switches the worker made in one of up to `rounds` rounds of kOps
// waited-for ops (stops at the first round under `enough`). Handed to the worker, each op
// would wake it at least once (twice counting its sleep), in every round. But the worker
// also wakes once per grace (10 ms) while ops are queued, and a caller preempted for longer
// than the grace leaves an op to it: on a loaded machine a round can be slow enough for
// that, all rounds hardly ever.
constexpr int kOps = 50;
long fewest_worker_switches(ProcessGroup& pg, const AllReduceOptions& o, int rounds, long enough) {
  Tensor t = Tensor::zeros({4});
  long fewest = -1;
  for (int round = 0; round < rounds; ++round) {
    const long before = worker_switches();
    for (int i = 0; i < kOps; ++i) pg.all_reduce(t, o)->wait();
    const long made = worker_switches() - before;
    if (fewest < 0 || made < fewest) fewest = made;
    // Both ranks must run the same number of rounds: they decide together.
    Tensor low = Tensor::of<int64_t>({fewest < enough ? 1 : 0});
    AllReduceOptions min;
    min.op = ReduceOp::MIN;
    pg.all_reduce(low, min)->wait();
    if (low.item() == 1) break;
  }
  return fewest;
}

TEST(GlooWorker, AWaiterRunsItsOpAndTheWorkerSleeps) {
  run_group(2, "gloo", [](ProcessGroup& pg) {
    Tensor t = Tensor::zeros({4});
    pg.all_reduce(t)->wait();  // connections warm
    ASSERT_GE(worker_switches(), 0) << "no thread named dc-gloo-worker";
    EXPECT_LT(fewest_worker_switches(pg, AllReduceOptions(), 5, kOps / 2), kOps / 2);
    // AVG: the ProcessGroup divides after the backend's SUM, in a Work chained on it.
    AllReduceOptions avg;
    avg.op = ReduceOp::AVG;
    EXPECT_LT(fewest_worker_switches(pg, avg, 5, kOps / 2), kOps / 2) << "AVG";
  });
}

TEST(GlooWorker, AnOpNobodyWaitsForStillRuns) {
  run_group(2, "gloo", [](ProcessGroup& pg) {
    // Twice: as the first op, and after one its caller waited for (the worker then leaves
    // it to the caller for the grace first).
    for (int round = 0; round < 2; ++round) {
      Tensor t = Tensor::of<float>({1.0f + pg.rank()});
      if (pg.rank() == 1) {
        pg.all_reduce(t)->wait();
        EXPECT_EQ(t.data_as<float>()[0], 3.0f);
        continue;
      }
      // Neither wait() nor is_completed(): only the worker can run it.
      auto done = std::make_shared<std::atomic<bool>>(false);
      WorkPtr w = pg.all_reduce(t);
      w->on_finish([done](std::exception_ptr) { done->store(true); });
      const auto start = Clock::now();
      while (!done->load() && seconds_since(start) < 20) std::this_thread::sleep_for(milliseconds(1));
      ASSERT_TRUE(done->load()) << "round " << round << ": an all_reduce nobody waited for did not run within 20 s";
      EXPECT_LT(seconds_since(start), 5.0) << "round " << round << ": the grace is 10 ms";
      EXPECT_EQ(t.data_as<float>()[0], 3.0f);
      w->wait();  // the caller waited for this one: the next op is left to it first
    }
  });
}

TEST(GlooWorker, OpsIssuedWithoutWaitingRunWhileTheCallerIsBusy) {
  run_group(2, "gloo", [](ProcessGroup& pg) {
    std::vector<Tensor> ts;
    for (int k = 0; k < 3; ++k) ts.push_back(Tensor::of<float>({1.0f + pg.rank()}));
    auto done = std::make_shared<std::atomic<int>>(0);
    std::vector<WorkPtr> works;
    for (auto& t : ts) {
      works.push_back(pg.all_reduce(t));
      works.back()->on_finish([done](std::exception_ptr) { ++*done; });
    }
    // A caller computing instead of waiting: the worker runs all three meanwhile.
    const auto start = Clock::now();
    while (done->load() < 3 && seconds_since(start) < 20) std::this_thread::sleep_for(milliseconds(1));
    EXPECT_EQ(done->load(), 3) << "three async all_reduces did not run within 20 s";
    for (auto& w : works) w->wait();
    for (auto& t : ts) EXPECT_EQ(t.data_as<float>()[0], 3.0f);
  });
}

TEST(GlooWorker, WaitingForALaterOpRunsTheEarlierOnesInIssueOrder) {
  run_group(2, "gloo", [](ProcessGroup& pg) {
    std::vector<Tensor> ts;
    for (int k = 0; k < 4; ++k) ts.push_back(Tensor::of<float>({static_cast<float>(10 * k + pg.rank())}));
    auto order = std::make_shared<std::vector<int>>();
    auto mu = std::make_shared<std::mutex>();
    std::vector<WorkPtr> works;
    for (int k = 0; k < 4; ++k) {
      works.push_back(pg.all_reduce(ts[k]));
      works.back()->on_finish([order, mu, k](std::exception_ptr) {
        std::lock_guard<std::mutex> lock(*mu);
        order->push_back(k);
      });
    }
    if (pg.rank() == 0) {
      works[3]->wait();  // first the last one: the earlier ones must not be skipped
      for (int k = 0; k < 3; ++k) EXPECT_TRUE(works[k]->is_completed()) << "op " << k;
    } else {
      for (auto& w : works) w->wait();
    }
    EXPECT_EQ(*order, (std::vector<int>{0, 1, 2, 3}));
    for (int k = 0; k < 4; ++k) EXPECT_EQ(ts[k].data_as<float>()[0], 20.0f * k + 1) << "op " << k;
  });
}

// With a timeout or without: a wait with a timeout inside the callback used to wait all of
// it and then say only that the op was still running (helper-69).
void wait_for_a_later_op_inside_a_callback(std::chrono::milliseconds timeout) {
  run_group(2, "gloo", [timeout](ProcessGroup& pg) {
    Tensor a = Tensor::zeros({2}), b = Tensor::zeros({2});
    if (pg.rank() == 1) {
      wait_for(pg, "callback set");  // so that rank 0's first op cannot end before that
      pg.all_reduce(a)->wait();
      pg.all_reduce(b)->wait();
      return;
    }
    WorkPtr first = pg.all_reduce(a);
    WorkPtr second;
    auto message = std::make_shared<std::string>();
    auto waited_s = std::make_shared<double>(0);
    first->on_finish([&second, message, waited_s, timeout](std::exception_ptr) {
      const auto start = Clock::now();
      try {
        second->wait(timeout);
        *message = "returned";
      } catch (const Error& e) {
        *message = e.what();
      }
      *waited_s = seconds_since(start);
    });
    second = pg.all_reduce(b);
    mark(pg, "callback set");
    second->wait();
    first->wait();
    EXPECT_NE(message->find("called from a Work callback"), std::string::npos) << *message;
    EXPECT_LT(*waited_s, 2.0) << "refused at once, not after the wait's timeout";
  });
}

TEST(GlooWorker, WaitingForALaterOpInsideACallbackIsRefusedNotAHang) {
  wait_for_a_later_op_inside_a_callback(kUseDefault);
}

TEST(GlooWorker, WaitingWithATimeoutForALaterOpInsideACallbackIsRefusedAtOnce) {
  wait_for_a_later_op_inside_a_callback(std::chrono::milliseconds(5000));
}

TEST(GlooWorker, WaitWithATimeoutGivesUpAndTheOpGoesOn) {
  run_group(2, "gloo", [](ProcessGroup& pg) {
    Tensor t = Tensor::of<float>({1.0f + pg.rank()});
    if (pg.rank() == 1) {
      wait_for(pg, "gave up");
      pg.all_reduce(t)->wait();
      EXPECT_EQ(t.data_as<float>()[0], 3.0f);
      return;
    }
    WorkPtr w = pg.all_reduce(t);
    const auto start = Clock::now();
    EXPECT_THROW(w->wait(milliseconds(300)), Timeout);
    const double took = seconds_since(start);
    EXPECT_GE(took, 0.29);
    EXPECT_LT(took, 3.0) << "wait(300 ms) ran the op itself instead of giving up";
    mark(pg, "gave up");
    w->wait();  // the worker ran it meanwhile, or runs it now
    EXPECT_EQ(t.data_as<float>()[0], 3.0f);
  });
}

TEST(GlooWorker, AbortFromAnotherThreadEndsTheOpAWaiterRuns) {
  run_group(2, "gloo", [](ProcessGroup& pg) {  // the group's timeout: 60 s
    if (pg.rank() == 1) {
      wait_for(pg, "aborted");  // never joins rank 0's all_reduce
      return;
    }
    Tensor t = Tensor::zeros({10});
    std::atomic<bool> aborted{false};
    std::thread aborter([&] {
      std::this_thread::sleep_for(milliseconds(300));
      pg.abort();
      aborted = true;
    });
    const auto start = Clock::now();
    try {
      pg.all_reduce(t)->wait();  // runs here, blocked on rank 1
      ADD_FAILURE() << "the all_reduce succeeded without rank 1";
    } catch (const PeerFailure& e) {
      EXPECT_NE(std::string(e.what()).find("shut down"), std::string::npos) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "wrong error: " << e.what();
    }
    EXPECT_LT(seconds_since(start), 5.0) << "the op outlived the abort by seconds";
    aborter.join();
    EXPECT_TRUE(aborted.load());
    mark(pg, "aborted");
  });
}

}  // namespace
}  // namespace distcomm
