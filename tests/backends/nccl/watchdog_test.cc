// The watchdog's logic with CPU stand-ins for a CUDA event and an NCCL communicator:
// deadlines, the order in which a fault is handled, fan-out to every op in flight,
// draining, and a Work callback that destroys the watchdog on its own thread.
#include "backends/nccl/watchdog.h"

#include <gtest/gtest.h>

#include <memory>

#include "api/errors.h"
#include "tests/backends/nccl/fake_device.h"

namespace distcomm {
namespace nccl {
namespace testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::shared_ptr<GroupFailure> new_failure() { return std::make_shared<GroupFailure>(0, nullptr); }

// The group's first failure, as recorded ("" if none).
std::string first_failure(const GroupFailure& f) {
  const auto first = f.first();
  return first ? first->message : "";
}

class WatchdogTest : public ::testing::Test {
 protected:
  std::shared_ptr<FakeComm> comm_ = std::make_shared<FakeComm>();
  std::shared_ptr<GroupFailure> failure_ = new_failure();
  Watchdog dog_{failure_, 200us};
};

TEST_F(WatchdogTest, FinishedOpsCompleteOnceWithSuccess) {
  auto a = std::make_shared<FakeOp>("all_reduce #0");
  auto b = std::make_shared<FakeOp>("all_reduce #1");
  dog_.track(comm_, a, 10s);
  dog_.track(comm_, b, 10s);
  a->set_done();
  ASSERT_TRUE(eventually([&] { return a->completions() == 1; }));
  EXPECT_EQ(b->completions(), 0);
  b->set_done();
  ASSERT_TRUE(eventually([&] { return dog_.in_flight() == 0 && b->completions() == 1; }));
  std::this_thread::sleep_for(5ms);
  EXPECT_EQ(a->completions(), 1);
  EXPECT_EQ(b->completions(), 1);
  EXPECT_EQ(a->error(), nullptr);
  EXPECT_EQ(comm_->aborts, 0);
  EXPECT_FALSE(failure_->failed());
}

TEST_F(WatchdogTest, TimeoutAbortsTheCommunicatorAndFailsEveryOpInFlight) {
  auto stuck = std::make_shared<FakeOp>("rank 1/2 group 'world' all_reduce #7");
  auto behind = std::make_shared<FakeOp>("rank 1/2 group 'world' broadcast #8");
  const auto start = Clock::now();
  dog_.track(comm_, stuck, 50ms);
  dog_.track(comm_, behind, 10s);
  ASSERT_TRUE(eventually([&] { return stuck->completions() == 1 && behind->completions() == 1; }));
  EXPECT_GE(Clock::now() - start, 50ms);
  const std::string m = message_of<Timeout>(stuck->error());
  EXPECT_NE(m.find("rank 1/2 group 'world' all_reduce #7"), std::string::npos) << m;
  EXPECT_NE(m.find("did not finish within 50 ms"), std::string::npos) << m;
  EXPECT_NE(m.find("ncclCommAbort"), std::string::npos) << m;
  // The others end with the group's refusal: the first failure's type, quoting it.
  const std::string b = message_of<Timeout>(behind->error());
  EXPECT_NE(b.find("the group is unusable since an earlier failure"), std::string::npos) << b;
  EXPECT_NE(b.find("all_reduce #7"), std::string::npos) << b;
  EXPECT_EQ(comm_->aborts, 1);
  EXPECT_NE(comm_->abort_reason().find("all_reduce #7"), std::string::npos) << comm_->abort_reason();
  EXPECT_NE(first_failure(*failure_).find("did not finish within 50 ms"), std::string::npos);
}

TEST_F(WatchdogTest, OpsThatEndedBeforeAFaultStillSucceed) {
  auto stuck = std::make_shared<FakeOp>("all_reduce #0");
  auto finished = std::make_shared<FakeOp>("all_reduce #1");
  finished->set_done();  // ended on the GPU, but the watchdog has not looked yet
  dog_.track(comm_, stuck, 0ms);
  dog_.track(comm_, finished, 10s);
  comm_->set_error("ncclCommGetAsyncError: remote process exited");
  ASSERT_TRUE(eventually([&] { return stuck->completions() == 1 && finished->completions() == 1; }));
  EXPECT_EQ(finished->error(), nullptr);
  EXPECT_NE(stuck->error(), nullptr);
}

TEST_F(WatchdogTest, AsyncCommunicatorErrorIsAPeerFailureNamingTheError) {
  auto op = std::make_shared<FakeOp>("rank 0/2 group 'world' all_gather #3");
  dog_.track(comm_, op, 10s);
  comm_->set_error("ncclCommGetAsyncError: remote process exited or there was a network error");
  ASSERT_TRUE(eventually([&] { return op->completions() == 1; }));
  const std::string m = message_of<PeerFailure>(op->error());
  EXPECT_NE(m.find("all_gather #3"), std::string::npos) << m;
  EXPECT_NE(m.find("remote process exited"), std::string::npos) << m;
  EXPECT_NE(m.find("communicator #0 of group 'world' on cuda:0"), std::string::npos) << m;
  EXPECT_NE(m.find("the watchdog aborted the communicator"), std::string::npos) << m;
  EXPECT_EQ(comm_->aborts, 1);
}

// ncclSystemError is often this rank's own trouble (shared memory, sockets, memory): the
// communicator reports it as an Error, and the watchdog keeps that type rather than call
// it a peer's failure.
TEST_F(WatchdogTest, ALocalCommunicatorErrorStaysLocal) {
  auto op = std::make_shared<FakeOp>("rank 0/2 group 'world' all_reduce #4");
  dog_.track(comm_, op, 10s);
  comm_->set_error(std::make_exception_ptr(Error("ncclCommGetAsyncError: unhandled system error; a system call failed on this rank")));
  ASSERT_TRUE(eventually([&] { return op->completions() == 1; }));
  const std::exception_ptr e = op->error();
  bool peer = false;
  try {
    std::rethrow_exception(e);
  } catch (const PeerFailure&) {
    peer = true;
  } catch (const Error&) {
  }
  EXPECT_FALSE(peer) << "a local NCCL error was reported as a peer's failure";
  const std::string m = message_of<Error>(e);
  EXPECT_NE(m.find("all_reduce #4: NCCL reported an error on"), std::string::npos) << m;
  EXPECT_NE(m.find("a system call failed on this rank"), std::string::npos) << m;
  ASSERT_TRUE(failure_->first());
  EXPECT_EQ(failure_->first()->kind, FailureRecord::Kind::kOther);
}

TEST_F(WatchdogTest, CudaErrorOfAnOpFailsIt) {
  auto op = std::make_shared<FakeOp>("reduce #2");
  dog_.track(comm_, op, 10s);
  op->set_failed();
  ASSERT_TRUE(eventually([&] { return op->completions() == 1; }));
  const std::string m = message_of<Error>(op->error());
  EXPECT_NE(m.find("reduce #2"), std::string::npos) << m;
  EXPECT_NE(m.find("illegal memory access"), std::string::npos) << m;
}

TEST_F(WatchdogTest, AfterAFaultNewOpsFailAtOnceAndTheirCommunicatorIsAborted) {
  auto stuck = std::make_shared<FakeOp>("all_reduce #0");
  dog_.track(comm_, stuck, 20ms);
  ASSERT_TRUE(eventually([&] { return failure_->failed(); }));
  auto other = std::make_shared<FakeComm>();
  auto late = std::make_shared<FakeOp>("all_reduce #1");
  dog_.track(other, late, 10s);
  EXPECT_EQ(late->completions(), 1);
  EXPECT_NE(message_of<Timeout>(late->error()).find("all_reduce #0"), std::string::npos)
      << "a late op fails with the first fault";
  EXPECT_EQ(other->aborts, 1);
}

TEST_F(WatchdogTest, ZeroTimeoutMeansNoDeadline) {
  auto op = std::make_shared<FakeOp>("all_reduce #0");
  dog_.track(comm_, op, 0ms);
  std::this_thread::sleep_for(30ms);
  EXPECT_EQ(op->completions(), 0);
  op->set_done();
  ASSERT_TRUE(eventually([&] { return op->completions() == 1; }));
  EXPECT_EQ(op->error(), nullptr);
}

TEST_F(WatchdogTest, StopFailsWhatIsInFlightAndAbortsItsCommunicator) {
  auto op = std::make_shared<FakeOp>("send p2p#4");
  dog_.track(comm_, op, 10s);
  dog_.stop("the backend was shut down");
  EXPECT_EQ(op->completions(), 1);
  const std::string m = message_of<PeerFailure>(op->error());
  EXPECT_NE(m.find("send p2p#4"), std::string::npos) << m;
  EXPECT_NE(m.find("shut down"), std::string::npos) << m;
  EXPECT_EQ(comm_->aborts, 1);
  dog_.stop("again");  // idempotent
  EXPECT_EQ(op->completions(), 1);
  EXPECT_FALSE(failure_->failed()) << "stopping the watchdog is not a failure";
}

// The fault is the group's before anything else happens: an op issued while the
// communicators are being aborted, or by a callback of a failed Work, is refused with the
// first fault instead of recording a later one.
TEST_F(WatchdogTest, AFaultIsRecordedBeforeAnyAbortOrCompletion) {
  for (bool from_issuer : {false, true}) {
    SCOPED_TRACE(from_issuer ? "reported by the issuer" : "found by the watchdog");
    auto failure = new_failure();
    Watchdog dog(failure, 200us);
    auto comm = std::make_shared<FakeComm>();
    std::atomic<int> saw_fault{0}, saw_none{0};
    auto check = [&] { ++(failure->failed() ? saw_fault : saw_none); };
    comm->on_abort = check;
    auto a = std::make_shared<FakeOp>("all_reduce #0");
    auto b = std::make_shared<FakeOp>("all_reduce #1");
    a->on_complete = check;
    b->on_complete = check;
    dog.track(comm, a, from_issuer ? 10000ms : 20ms);
    dog.track(comm, b, 10s);
    FakeOp issuing("all_reduce #2");
    if (from_issuer) dog.fail(std::make_exception_ptr(Timeout("all_reduce #2: NCCL did not take the op")), comm, issuing);
    ASSERT_TRUE(eventually([&] { return a->completions() == 1 && b->completions() == 1; }));
    EXPECT_EQ(saw_none, 0);
    EXPECT_EQ(saw_fault, 3);  // one abort, two completions
  }
}

// An enqueue that timed out aborts its communicator: every op in flight, on that
// communicator and on others, fails then, and none can pass as a success later.
TEST_F(WatchdogTest, AFailureReportedByTheIssuerFailsEveryOpInFlight) {
  auto other = std::make_shared<FakeComm>();
  auto a = std::make_shared<FakeOp>("all_reduce #3");
  auto b = std::make_shared<FakeOp>("send p2p#0");
  dog_.track(comm_, a, 10s);
  dog_.track(other, b, 10s);
  const auto first = std::make_exception_ptr(Timeout("all_reduce #4: NCCL did not take the op before its timeout"));
  FakeOp issuing("all_reduce #4");
  EXPECT_EQ(dog_.fail(first, comm_, issuing), first) << "the first failure is the issuing op's own error";
  EXPECT_EQ(a->completions(), 1);
  EXPECT_EQ(b->completions(), 1);
  EXPECT_NE(message_of<Timeout>(a->error()).find("all_reduce #4: NCCL did not take"), std::string::npos);
  EXPECT_EQ(comm_->aborts, 1);
  EXPECT_EQ(other->aborts, 1);
  EXPECT_NE(first_failure(*failure_).find("all_reduce #4: NCCL did not take"), std::string::npos);
  // A later failure does not replace the first, and its op ends with the group's refusal.
  const std::string later = message_of<Timeout>(
      dog_.fail(std::make_exception_ptr(PeerFailure("secondary")), nullptr, FakeOp("all_reduce #5")));
  EXPECT_NE(later.find("the group is unusable since an earlier failure"), std::string::npos) << later;
  EXPECT_NE(first_failure(*failure_).find("all_reduce #4"), std::string::npos);
}

TEST_F(WatchdogTest, DrainWaitsForOpsInFlightAndIsBounded) {
  auto op = std::make_shared<FakeOp>("all_reduce #0");
  dog_.track(comm_, op, 0ms);
  auto start = Clock::now();
  EXPECT_FALSE(dog_.drain(start + 50ms));
  EXPECT_GE(Clock::now() - start, 50ms);
  EXPECT_LT(Clock::now() - start, 2s);
  std::thread finisher([&] {
    std::this_thread::sleep_for(30ms);
    op->set_done();
  });
  start = Clock::now();
  EXPECT_TRUE(dog_.drain(start + 10s));
  EXPECT_LT(Clock::now() - start, 5s);
  finisher.join();
  EXPECT_EQ(op->error(), nullptr);
  EXPECT_EQ(comm_->aborts, 0);
}

// A Work callback may destroy the group, hence the watchdog, on the watchdog's own thread.
// The thread then ends by itself, and the ops still in flight fail instead of being lost.
// (Under --config=asan this also shows that nothing freed is touched afterwards.)
TEST(WatchdogLifetimeTest, ACallbackMayDestroyTheWatchdogOnItsThread) {
  auto dog = std::make_unique<Watchdog>(new_failure(), 200us);
  auto comm = std::make_shared<FakeComm>();
  auto both_done = std::make_shared<std::atomic<bool>>(false);
  auto first = std::make_shared<FakeOp>("all_reduce #0", both_done);
  auto second = std::make_shared<FakeOp>("all_reduce #1", both_done);
  auto third = std::make_shared<FakeOp>("all_reduce #2");
  std::atomic<bool> destroyed{false};
  first->on_complete = [&] {
    dog.reset();  // the group's destructor, run by a callback
    destroyed = true;
  };
  dog->track(comm, first, 10s);
  dog->track(comm, second, 10s);
  dog->track(comm, third, 10s);
  // The second ends with the first: it completes as a success whether the watchdog sees
  // it before the first's callback or in the same round, after the destroy.
  *both_done = true;
  ASSERT_TRUE(eventually([&] { return destroyed.load(); }));
  ASSERT_TRUE(eventually([&] { return second->completions() == 1 && third->completions() == 1; }));
  EXPECT_EQ(second->error(), nullptr);
  EXPECT_NE(message_of<PeerFailure>(third->error()).find("shut down"), std::string::npos);
  std::this_thread::sleep_for(20ms);  // the detached thread ends on its own
}

}  // namespace
}  // namespace testing
}  // namespace nccl
}  // namespace distcomm
