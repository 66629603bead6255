#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

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

// An op whose waiter runs it, as gloo's waiters run their ops and shm's drive their group:
// it ends only inside wait(), which records the timeout it was given. With refuse_with set
// its wait throws that before the op ends, as mpi's does inside a callback.
class DrivenByItsWaiter : public Work {
 public:
  explicit DrivenByItsWaiter(uint64_t seq) : Work(OpType::kSend, seq, "send #" + std::to_string(seq)) {}
  void wait(std::chrono::milliseconds timeout = kUseDefault) override {
    timeouts.push_back(timeout);
    if (!refuse_with.empty()) throw Error(refuse_with);
    finish();
    Work::wait(timeout);
  }
  std::vector<std::chrono::milliseconds> timeouts;
  std::string refuse_with;
};

// A then() Work waited with a timeout drives its first op within that timeout (it used to
// poll once and wait on its own condition, which nothing else would end).
TEST(Work, ThenWaitedWithATimeoutDrivesItsFirstWithinIt) {
  auto first = std::make_shared<DrivenByItsWaiter>(3);
  int ran = 0;
  WorkPtr chained = then(first, [&] { ++ran; });
  EXPECT_NO_THROW(chained->wait(std::chrono::milliseconds(2000)));
  EXPECT_EQ(ran, 1);
  ASSERT_EQ(first->timeouts.size(), 1u);
  EXPECT_GT(first->timeouts[0].count(), 0);
  EXPECT_LE(first->timeouts[0].count(), 2000);
}

// all_of()'s Work (batch_isend_irecv's) drives each part as its own waiter would, with or
// without a timeout (it used to wait on its own condition only: a batch whose parts are run
// by their waiters never ended).
TEST(Work, AllOfDrivesEachPartInTurn) {
  // The bounded wait first: a regression fails there rather than by the test's timeout.
  for (auto timeout : {std::chrono::milliseconds(2000), kUseDefault}) {
    auto a = std::make_shared<DrivenByItsWaiter>(1), b = std::make_shared<DrivenByItsWaiter>(2);
    WorkPtr batch = all_of({a, b}, OpType::kBatchP2P, 1, "batch");
    ASSERT_NO_THROW(batch->wait(timeout));
    EXPECT_TRUE(batch->is_success());
    EXPECT_EQ(a->timeouts.size(), 1u);
    EXPECT_EQ(b->timeouts.size(), 1u);
  }
}

// A part whose wait refuses before its op ends (mpi inside a callback) makes the batch's
// wait throw that, rather than wait for ever; a part's own error is the batch's error.
TEST(Work, AllOfPassesARefusedWaitOnAndKeepsThePartsErrors) {
  auto a = std::make_shared<DrivenByItsWaiter>(1), b = std::make_shared<DrivenByItsWaiter>(2);
  a->refuse_with = "would wait for itself";
  WorkPtr batch = all_of({a, b}, OpType::kBatchP2P, 1, "batch");
  EXPECT_THROW(batch->wait(), Error);
  EXPECT_FALSE(batch->is_completed());

  auto ok = std::make_shared<Work>(OpType::kSend, 1), failed = std::make_shared<Work>(OpType::kRecv, 2);
  WorkPtr both = all_of({ok, failed}, OpType::kBatchP2P, 1, "batch");
  ok->finish();
  failed->finish(std::make_exception_ptr(PeerFailure("rank 1 died")));
  EXPECT_THROW(both->wait(std::chrono::milliseconds(1000)), PeerFailure);
  EXPECT_TRUE(all_of({}, OpType::kBatchP2P, 0, "empty")->is_success());
}

// A batch's callback runs though the program kept no reference to its Work, as any op's
// does (the parts' callbacks hold it until they finish); its Timeout names the batch.
TEST(Work, AllOfKeepsItsCallbacksWithoutAReferenceAndNamesItselfInATimeout) {
  auto a = std::make_shared<Work>(OpType::kSend, 1), b = std::make_shared<Work>(OpType::kRecv, 2);
  bool ran = false;
  all_of({a, b}, OpType::kBatchP2P, 1, "the batch")->on_finish([&](std::exception_ptr) { ran = true; });
  a->finish();
  b->finish();
  EXPECT_TRUE(ran);

  auto c = std::make_shared<Work>(OpType::kSend, 3, "send #3");
  WorkPtr batch = all_of({c}, OpType::kBatchP2P, 3, "the batch");
  try {
    batch->wait(std::chrono::milliseconds(20));
    ADD_FAILURE() << "no Timeout";
  } catch (const Timeout& e) {
    EXPECT_EQ(std::string(e.what()).rfind("the batch: not finished after 20 ms", 0), 0u) << e.what();
  }
  c->finish();
}

}  // namespace
}  // namespace distcomm
