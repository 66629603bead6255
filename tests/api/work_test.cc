#include <gtest/gtest.h>

#include <thread>

#include "api/errors.h"
#include "api/work.h"

namespace distcomm {
namespace {

TEST(Work, WaitReturnsAfterFinishFromAnotherThread) {
  auto w = std::make_shared<Work>(OpType::kAllReduce, 7, "rank 0/2 group 'world' all_reduce #7");
  EXPECT_FALSE(w->is_completed());
  std::thread t([w] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    w->finish();
  });
  w->wait();
  t.join();
  EXPECT_TRUE(w->is_success());
  EXPECT_EQ(w->seq(), 7u);
  EXPECT_GE(w->duration(), std::chrono::milliseconds(15));
}

TEST(Work, WaitTimeoutThrowsTimeoutNamingTheOp) {
  Work w(OpType::kBroadcast, 3, "rank 1/2 group 'world' broadcast #3");
  try {
    w.wait(std::chrono::milliseconds(30));
    FAIL() << "expected Timeout";
  } catch (const Timeout& e) {
    EXPECT_NE(std::string(e.what()).find("broadcast #3"), std::string::npos) << e.what();
  }
}

TEST(Work, ErrorsKeepTheirTypeAndGainContext) {
  Work w(OpType::kAllGather, 9, "rank 2/4 group 'world' all_gather #9");
  w.finish(std::make_exception_ptr(PeerFailure("connection to rank 3 closed")));
  EXPECT_TRUE(w.is_completed());
  EXPECT_FALSE(w.is_success());
  try {
    w.wait();
    FAIL();
  } catch (const PeerFailure& e) {
    EXPECT_EQ(std::string(e.what()), "rank 2/4 group 'world' all_gather #9: connection to rank 3 closed");
  }
}

TEST(Work, CallbacksRunBeforeWaitersWakeAndAfterFinishAtOnce) {
  auto w = std::make_shared<Work>(OpType::kAllReduce, 0);
  int seen = 0;
  w->on_finish([&](std::exception_ptr e) { seen = e ? -1 : 1; });
  std::thread t([w] { w->finish(); });
  w->wait();
  EXPECT_EQ(seen, 1);  // the callback's effect is visible when wait returns
  t.join();
  int late = 0;
  w->on_finish([&](std::exception_ptr) { late = 2; });
  EXPECT_EQ(late, 2);
}

// A callback that throws (a handler that rethrows the op's error) runs on the thread that
// ends the op, often a backend's own: finish() must still end the Work, run the other
// callbacks and wake the waiters, and throw nothing into that thread.
TEST(Work, ACallbackThatThrowsNeitherEscapesNorLeavesTheWorkUnfinished) {
  auto w = std::make_shared<Work>(OpType::kAllReduce, 5, "rank 0/2 group 'world' all_reduce #5");
  bool second_ran = false;
  w->on_finish([](std::exception_ptr e) { std::rethrow_exception(e); });
  w->on_finish([&](std::exception_ptr) { second_ran = true; });
  std::thread waiter([w] { EXPECT_THROW(w->wait(), PeerFailure); });
  std::thread finisher([w] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_NO_THROW(w->finish(std::make_exception_ptr(PeerFailure("rank 1 died"))));
  });
  finisher.join();
  waiter.join();
  EXPECT_TRUE(w->is_completed());
  EXPECT_TRUE(second_ran);
}

TEST(Work, OnlyTheFirstFinishCounts) {
  Work w(OpType::kBarrier, 0);
  w.finish();
  w.finish(std::make_exception_ptr(Timeout("late")));
  EXPECT_TRUE(w.is_success());
}

// then(): the one way to post-process an op (list unpacking, AVG's division, comm hooks).
TEST(Work, ThenRunsAfterTheFirstAndCarriesItsIdentity) {
  auto first = std::make_shared<Work>(OpType::kAllReduce, 7, "rank 0/2 group 'world' all_reduce #7");
  int ran = 0;
  WorkPtr chained = then(first, [&] { ++ran; });
  EXPECT_FALSE(chained->is_completed());
  first->finish();
  chained->wait();
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(chained->op(), OpType::kAllReduce);
  EXPECT_EQ(chained->seq(), 7u);
  EXPECT_EQ(chained->description(), first->description());
  EXPECT_EQ(then(first, [] {}, OpType::kAllReduceCoalesced)->op(), OpType::kAllReduceCoalesced);
}

TEST(Work, ThenPassesTheFirstErrorOnAndTurnsItsOwnIntoOne) {
  auto failed = std::make_shared<Work>(OpType::kBroadcast, 1);
  bool ran = false;
  WorkPtr after_failure = then(failed, [&] { ran = true; });
  failed->finish(std::make_exception_ptr(Timeout("late")));
  EXPECT_THROW(after_failure->wait(), Timeout);
  EXPECT_FALSE(ran) << "next does not run after an error";

  auto ok = std::make_shared<Work>(OpType::kBroadcast, 2);
  WorkPtr throwing = then(ok, [] { throw InvalidArgument("cannot unpack"); });
  ok->finish();
  EXPECT_THROW(throwing->wait(), InvalidArgument);
}

}  // namespace
}  // namespace distcomm
