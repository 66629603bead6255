// How the nccl backend ends (backend_ending.h), with CPU stand-ins for the communicators
// and the ops on the GPU: a destroy gives the ops in flight the shutdown grace and then
// finalizes the communicators; an abort waits for nothing and aborts them all.
#include "backends/nccl/backend_ending.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "tests/backends/nccl/fake_device.h"

namespace distcomm {
namespace nccl {
namespace testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A communicator that also counts the clean closes (ncclCommFinalize + ncclCommDestroy).
class ClosableComm : public FakeComm {
 public:
  void close(Clock::time_point, const std::string&) { ++closes; }
  std::atomic<int> closes{0};
};

class BackendEndingTest : public ::testing::Test {
 protected:
  std::shared_ptr<ClosableComm> comm(const std::string& name) {
    return comms_.get_or_make(name, [] { return std::make_shared<ClosableComm>(); });
  }
  void end(Ending how, std::chrono::milliseconds grace) {
    EndingSettings s;
    s.backend = "the nccl backend of group 'world'";
    s.grace = grace;
    s.close_time = 1000ms;
    end_backend(how, s, *failure_, dog_, comms_);
  }

  std::shared_ptr<GroupFailure> failure_ = std::make_shared<GroupFailure>(0, nullptr);
  Watchdog dog_{failure_, 200us};
  CommRegistry<ClosableComm> comms_;
};

TEST_F(BackendEndingTest, AnAbortWaitsNoGraceAndAbortsEveryCommunicator) {
  auto busy = comm("group on cuda:0");
  auto idle = comm("pair with rank 1");
  auto stuck = std::make_shared<FakeOp>("rank 0/2 group 'world' all_reduce #3");
  dog_.track(busy, stuck, 0ms);
  const auto start = Clock::now();
  end(Ending::kAbort, 60000ms);
  EXPECT_LT(Clock::now() - start, 30s) << "the abort waited for the 60 s shutdown grace";
  ASSERT_EQ(stuck->completions(), 1);
  const std::string m = message_of<PeerFailure>(stuck->error());
  EXPECT_NE(m.find("all_reduce #3"), std::string::npos) << m;
  EXPECT_NE(m.find("was shut down by ProcessGroup::abort()"), std::string::npos) << m;
  EXPECT_GE(busy->aborts, 1);
  EXPECT_EQ(idle->aborts, 1) << "a communicator with nothing in flight is aborted too, not finalized";
  EXPECT_EQ(busy->closes + idle->closes, 0);
  ASSERT_TRUE(failure_->first());
  EXPECT_EQ(failure_->first()->kind, FailureRecord::Kind::kShutDown);
  // Later ops are refused.
  EXPECT_THROW(failure_->check_usable(), PeerFailure);
}

TEST_F(BackendEndingTest, ADestroyLetsOpsInFlightEndAndFinalizesTheCommunicators) {
  auto c = comm("group on cuda:0");
  auto op = std::make_shared<FakeOp>("all_reduce #0");
  dog_.track(c, op, 0ms);
  auto ended = std::async(std::launch::async, [&] { end(Ending::kDestroy, 60000ms); });
  // The op ends on the GPU once the destroy has begun (later ops are refused from then on).
  ASSERT_TRUE(eventually([&] { return failure_->failed(); }));
  EXPECT_EQ(ended.wait_for(50ms), std::future_status::timeout) << "the destroy did not wait for the op";
  op->set_done();
  ASSERT_EQ(ended.wait_for(30s), std::future_status::ready);
  EXPECT_EQ(op->completions(), 1);
  EXPECT_EQ(op->error(), nullptr) << message_of<Error>(op->error());
  EXPECT_EQ(c->aborts, 0);
  EXPECT_EQ(c->closes, 1);
}

TEST_F(BackendEndingTest, ADestroyAbortsWhatIsStillRunningAfterTheGrace) {
  auto c = comm("group on cuda:0");
  auto stuck = std::make_shared<FakeOp>("all_reduce #5");
  dog_.track(c, stuck, 0ms);
  const auto start = Clock::now();
  end(Ending::kDestroy, 200ms);
  EXPECT_GE(Clock::now() - start, 200ms);
  const std::string m = message_of<PeerFailure>(stuck->error());
  EXPECT_NE(m.find("still running after the 200 ms shutdown grace"), std::string::npos) << m;
  EXPECT_GE(c->aborts, 1);
  EXPECT_EQ(c->closes, 1);  // closing an aborted communicator frees what the abort left
}

TEST_F(BackendEndingTest, EndingTwiceChangesNothingAndNewCommunicatorsAreRefused) {
  auto c = comm("group on cuda:0");
  end(Ending::kAbort, 0ms);
  end(Ending::kDestroy, 0ms);
  EXPECT_EQ(c->aborts, 1);
  EXPECT_EQ(c->closes, 0);
  EXPECT_THROW(comm("group on cuda:1"), PeerFailure);
}

// A communicator whose finalize waits on its peers until its deadline, unless aborted
// meanwhile (as NcclComm::close's poll watches the abort flag).
class SlowClosingComm : public FakeComm {
 public:
  void close(Clock::time_point deadline, const std::string&) {
    closing = true;
    while (aborts == 0 && Clock::now() < deadline) std::this_thread::sleep_for(1ms);
  }
  std::atomic<bool> closing{false};
};

// ProcessGroup::abort() from another thread while the group is being destroyed: the abort
// hurries the destroy's finalize (before, it found the backend ending and did nothing, and
// the destroy waited out its whole close time).
TEST(BackendEndingOnceTest, AnAbortDuringADestroyAbortsWhatTheDestroyIsClosing) {
  auto failure = std::make_shared<GroupFailure>(0, nullptr);
  Watchdog dog{failure, 200us};
  CommRegistry<SlowClosingComm> comms;
  auto c = comms.get_or_make("group on cuda:0", [] { return std::make_shared<SlowClosingComm>(); });
  BackendEnding<SlowClosingComm> ending;
  EndingSettings s;
  s.backend = "the nccl backend of group 'world'";
  s.close_time = 30000ms;
  const auto start = Clock::now();
  auto destroy = std::async(std::launch::async, [&] { return ending.end(Ending::kDestroy, s, *failure, dog, comms); });
  while (!c->closing) std::this_thread::sleep_for(1ms);
  EXPECT_FALSE(ending.end(Ending::kAbort, s, *failure, dog, comms)) << "the destroy had begun: it ends the backend";
  EXPECT_TRUE(destroy.get());
  EXPECT_LT(Clock::now() - start, 10s) << "the destroy waited out its close time despite the abort";
  EXPECT_EQ(c->aborts, 1);
  EXPECT_NE(c->abort_reason().find("ProcessGroup::abort()"), std::string::npos) << c->abort_reason();
}

TEST(BackendEndingOnceTest, AnAbortAfterADestroyEndedDoesNothing) {
  auto failure = std::make_shared<GroupFailure>(0, nullptr);
  Watchdog dog{failure, 200us};
  CommRegistry<SlowClosingComm> comms;
  auto c = comms.get_or_make("group on cuda:0", [] { return std::make_shared<SlowClosingComm>(); });
  BackendEnding<SlowClosingComm> ending;
  EndingSettings s;
  s.backend = "the nccl backend of group 'world'";
  s.close_time = 1ms;  // the slow close gives up at once
  EXPECT_TRUE(ending.end(Ending::kDestroy, s, *failure, dog, comms));
  const int aborts = c->aborts;
  EXPECT_FALSE(ending.end(Ending::kAbort, s, *failure, dog, comms));
  EXPECT_EQ(c->aborts, aborts);
}

}  // namespace
}  // namespace testing
}  // namespace nccl
}  // namespace distcomm
