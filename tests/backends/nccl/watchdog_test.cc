// The watchdog's logic with CPU stand-ins for a CUDA event and an NCCL communicator: the
// real ones need a GPU, the deadlines, fault fan-out and completion rules do not.
#include "backends/nccl/watchdog.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "api/errors.h"

namespace distcomm {
namespace nccl {
namespace {

using namespace std::chrono_literals;

// An op that ends when the test says so (as an event passes on the GPU).
class FakeOp : public TrackedOp {
 public:
  explicit FakeOp(std::string label) : label_(std::move(label)) {}
  Poll poll(std::string* error) override {
    if (failed_) {
      if (error) *error = "cudaEventQuery: an illegal memory access was encountered";
      return Poll::kFailed;
    }
    return done_ ? Poll::kDone : Poll::kRunning;
  }
  void complete(std::exception_ptr error) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++completions_;
    if (completions_ == 1) error_ = error;
  }
  std::string label() const override { return label_; }

  void set_done() { done_ = true; }
  void set_failed() { failed_ = true; }
  int completions() {
    std::lock_guard<std::mutex> lock(mu_);
    return completions_;
  }
  std::exception_ptr error() {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }

 private:
  const std::string label_;
  std::atomic<bool> done_{false};
  std::atomic<bool> failed_{false};
  std::mutex mu_;
  int completions_ = 0;
  std::exception_ptr error_;
};

class FakeComm : public WatchedComm {
 public:
  std::string async_error() override {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }
  void abort() override { ++aborts_; }
  std::string label() const override { return "communicator #0 of group 'world' on cuda:0"; }

  void set_error(const std::string& e) {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = e;
  }
  std::atomic<int> aborts_{0};

 private:
  std::mutex mu_;
  std::string error_;
};

// Polls until cond() holds or two seconds pass.
template <typename Cond>
bool eventually(Cond cond) {
  for (int i = 0; i < 2000; ++i) {
    if (cond()) return true;
    std::this_thread::sleep_for(1ms);
  }
  return cond();
}

template <typename E>
std::string message_of(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const E& x) {
    return x.what();
  } catch (const std::exception& x) {
    return std::string("wrong exception type: ") + x.what();
  }
  return "";
}

class WatchdogTest : public ::testing::Test {
 protected:
  WatchdogTest() : dog_([this](std::exception_ptr e) { faults_.push_back(e); }, 200us) {}
  std::vector<std::exception_ptr> faults_;  // written by the watchdog thread only
  std::shared_ptr<FakeComm> comm_ = std::make_shared<FakeComm>();
  Watchdog dog_;
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
  ASSERT_TRUE(eventually([&] { return dog_.in_flight() == 0; }));
  std::this_thread::sleep_for(5ms);
  EXPECT_EQ(a->completions(), 1);
  EXPECT_EQ(b->completions(), 1);
  EXPECT_EQ(a->error(), nullptr);
  EXPECT_EQ(comm_->aborts_, 0);
}

TEST_F(WatchdogTest, TimeoutAbortsTheCommunicatorAndFailsEveryOpInFlight) {
  auto stuck = std::make_shared<FakeOp>("rank 1/2 group 'world' all_reduce #7");
  auto behind = std::make_shared<FakeOp>("rank 1/2 group 'world' broadcast #8");
  dog_.track(comm_, stuck, 50ms);
  dog_.track(comm_, behind, 10s);
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(eventually([&] { return stuck->completions() == 1 && behind->completions() == 1; }));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 50ms);
  const std::string m = message_of<Timeout>(stuck->error());
  EXPECT_NE(m.find("rank 1/2 group 'world' all_reduce #7"), std::string::npos) << m;
  EXPECT_NE(m.find("did not finish within 50 ms"), std::string::npos) << m;
  EXPECT_NE(m.find("ncclCommAbort"), std::string::npos) << m;
  const std::string b = message_of<PeerFailure>(behind->error());
  EXPECT_NE(b.find("broadcast #8"), std::string::npos) << b;
  EXPECT_NE(b.find("earlier fault"), std::string::npos) << b;
  EXPECT_EQ(comm_->aborts_, 1);
  ASSERT_TRUE(eventually([&] { return dog_.fault() != nullptr; }));
  EXPECT_EQ(faults_.size(), 1u);
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
  EXPECT_EQ(comm_->aborts_, 1);
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
  ASSERT_TRUE(eventually([&] { return dog_.fault() != nullptr; }));
  auto other = std::make_shared<FakeComm>();
  auto late = std::make_shared<FakeOp>("all_reduce #1");
  dog_.track(other, late, 10s);
  EXPECT_EQ(late->completions(), 1);
  EXPECT_NE(message_of<Timeout>(late->error()).find("all_reduce #0"), std::string::npos)
      << "a late op fails with the first fault";
  EXPECT_EQ(other->aborts_, 1);
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
  EXPECT_EQ(comm_->aborts_, 1);
  dog_.stop("again");  // idempotent
  EXPECT_EQ(op->completions(), 1);
}

}  // namespace
}  // namespace nccl
}  // namespace distcomm
