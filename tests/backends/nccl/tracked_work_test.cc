// The Work of a device op, with a fake end marker: when it counts as ended, and why an op
// whose communicator was aborted never succeeds, although its end marker passes (a kernel
// torn down by ncclCommAbort exits, and its end event fires).
#include "backends/nccl/tracked_work.h"

#include <gtest/gtest.h>

#include <memory>
#include <thread>

#include "api/cuda_stream.h"
#include "api/errors.h"
#include "backends/nccl/watchdog.h"
#include "tests/backends/nccl/fake_device.h"

namespace distcomm {
namespace nccl {
namespace testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using Marker = TrackedWork::Marker;

// Aborting the fake communicator lets the ops' markers pass (as the kernels exit), then
// holds the abort for a while, the window in which a poll of the marker alone would have
// called the op a success.
void markers_pass_on_abort(FakeComm& comm, const std::vector<std::shared_ptr<FakeWork>>& works) {
  std::vector<std::weak_ptr<FakeWork>> weak(works.begin(), works.end());  // Works hold the comm
  comm.on_abort = [weak] {
    for (auto& w : weak) {
      if (auto work = w.lock()) work->marker = Marker::kPassed;
    }
    std::this_thread::sleep_for(30ms);
  };
}

TEST(TrackedWorkTest, AnOpWhoseCommunicatorWasAbortedNeverSucceeds) {
  for (bool timeout : {true, false}) {
    SCOPED_TRACE(timeout ? "aborted on a timeout" : "aborted on an NCCL error");
    auto failure = std::make_shared<GroupFailure>(0, nullptr);
    Watchdog dog(failure, 200us);
    auto comm = std::make_shared<FakeComm>();
    auto stuck = std::make_shared<FakeWork>("all_reduce #1", comm);
    auto behind = std::make_shared<FakeWork>("all_reduce #2", comm);
    markers_pass_on_abort(*comm, {stuck, behind});
    dog.track(comm, stuck, timeout ? 30ms : 0ms);
    dog.track(comm, behind, 0ms);
    if (!timeout) comm->set_error("ncclCommGetAsyncError: remote process exited");
    // The user's thread polls as callers do, racing the watchdog.
    ASSERT_TRUE(eventually([&] { return stuck->is_completed() && behind->is_completed(); }));
    EXPECT_FALSE(stuck->is_success());
    EXPECT_FALSE(behind->is_success()) << "an op queued behind the stuck one passed as a success";
    EXPECT_EQ(comm->aborts, 1);
    ASSERT_TRUE(failure->failed());
  }
}

// The enqueue of another op timed out and its thread aborted the communicator itself (no
// watchdog round in between): ops of that communicator still in flight fail.
TEST(TrackedWorkTest, AnAbortByAnotherPathAlsoFailsTheOpsInFlight) {
  auto failure = std::make_shared<GroupFailure>(0, nullptr);
  Watchdog dog(failure, 200us);
  auto comm = std::make_shared<FakeComm>();
  auto running = std::make_shared<FakeWork>("broadcast #4", comm);
  dog.track(comm, running, 0ms);
  comm->abort("all_reduce #5: NCCL did not take the op before its timeout");
  running->marker = Marker::kPassed;  // the kernel exits because of the abort
  ASSERT_TRUE(eventually([&] { return running->is_completed(); }));
  const std::string m = message_of<PeerFailure>(running->exception());
  EXPECT_NE(m.find("broadcast #4"), std::string::npos) << m;
  EXPECT_NE(m.find("was aborted before the op was seen to end: all_reduce #5"), std::string::npos) << m;
  ASSERT_TRUE(failure->first());
  EXPECT_NE(failure->first()->message.find("was aborted before the op was seen to end"), std::string::npos)
      << "the watchdog records the failure as the group's";
}

TEST(TrackedWorkTest, IsCompletedAsksTheMarkerWithoutWaitingForTheWatchdog) {
  auto failure = std::make_shared<GroupFailure>(0, nullptr);
  Watchdog dog(failure, std::chrono::seconds(10));  // its next round is far away
  auto comm = std::make_shared<FakeComm>();
  auto w = std::make_shared<FakeWork>("all_reduce #0", comm);
  dog.track(comm, w, 0ms);
  EXPECT_FALSE(w->is_completed());
  w->marker = Marker::kPassed;
  EXPECT_TRUE(w->is_completed());
  EXPECT_TRUE(w->is_success());
  EXPECT_EQ(comm->aborts, 0);
}

TEST(TrackedWorkTest, ACudaErrorFailsTheWorkAndTheGroup) {
  auto failure = std::make_shared<GroupFailure>(0, nullptr);
  Watchdog dog(failure, 200us);
  auto comm = std::make_shared<FakeComm>();
  auto w = std::make_shared<FakeWork>("reduce #3", comm);
  dog.track(comm, w, 0ms);
  w->marker = Marker::kError;
  ASSERT_TRUE(eventually([&] { return w->is_completed(); }));
  const std::string m = message_of<Error>(w->exception());
  EXPECT_NE(m.find("reduce #3: CUDA reported an error while the op ran"), std::string::npos) << m;
  ASSERT_TRUE(failure->first());
  EXPECT_NE(failure->first()->message.find("CUDA reported an error"), std::string::npos);
}

TEST(TrackedWorkTest, WaitHoldsTheDeviceNotTheHostUnlessBlocking) {
  auto comm = std::make_shared<FakeComm>();
  auto w = std::make_shared<FakeWork>("all_reduce #0", comm);
  w->wait();
  EXPECT_EQ(w->device_waits, 1);
  EXPECT_FALSE(w->is_completed());

  auto blocking = std::make_shared<FakeWork>("all_reduce #1", comm, /*blocking_wait=*/true);
  std::thread ends([&] {
    std::this_thread::sleep_for(50ms);
    blocking->marker = Marker::kPassed;
  });
  const auto start = Clock::now();
  blocking->wait();
  EXPECT_GE(Clock::now() - start, 50ms) << "a blocking wait returned before the op ended";
  EXPECT_TRUE(blocking->is_success());
  EXPECT_EQ(blocking->device_waits, 0);
  ends.join();
}

// Which stream wait() makes wait: the one the op was issued after, unless the thread has
// a current stream (CudaStreamGuard, as c10's); wait(stream) names it outright.
TEST(TrackedWorkTest, WaitHoldsTheCurrentStreamElseTheIssuingOne) {
  auto comm = std::make_shared<FakeComm>();
  const WorkPtr w = std::make_shared<FakeWork>("all_reduce #0", comm, false, fake_stream(0x10));
  auto* fake = static_cast<FakeWork*>(w.get());
  w->wait();
  EXPECT_EQ(fake->last_held, fake_stream(0x10));
  {
    CudaStreamGuard on(fake_stream(0x20));
    w->wait();
    EXPECT_EQ(fake->last_held, fake_stream(0x20));
    {
      CudaStreamGuard legacy(nullptr);
      w->wait();
      EXPECT_EQ(fake->last_held, nullptr) << "a guard of nullptr is the legacy default stream";
    }
    w->wait();
    EXPECT_EQ(fake->last_held, fake_stream(0x20)) << "guards nest";
  }
  w->wait(fake_stream(0x30));
  EXPECT_EQ(fake->last_held, fake_stream(0x30));
  w->wait();
  EXPECT_EQ(fake->last_held, fake_stream(0x10)) << "wait(stream) sets the stream for that call only";
  EXPECT_EQ(current_cuda_stream(fake_stream(0x40)), fake_stream(0x40));
  EXPECT_EQ(fake->device_waits, 6);
}

TEST(TrackedWorkTest, ABlockingWaitWithATimeoutThrowsTimeoutInTime) {
  auto comm = std::make_shared<FakeComm>();
  auto w = std::make_shared<FakeWork>("all_reduce #9", comm, /*blocking_wait=*/true);
  const auto start = Clock::now();
  try {
    w->wait(60ms);
    ADD_FAILURE() << "wait returned for an op that never ends";
  } catch (const Timeout& e) {
    EXPECT_NE(std::string(e.what()).find("all_reduce #9: not finished after 60 ms"), std::string::npos) << e.what();
  }
  EXPECT_GE(Clock::now() - start, 60ms);
  EXPECT_LT(Clock::now() - start, 2s);
}

TEST(TrackedWorkTest, AFailedWorkRethrowsOnWait) {
  auto comm = std::make_shared<FakeComm>();
  auto w = std::make_shared<FakeWork>("all_reduce #2", comm);
  w->complete(std::make_exception_ptr(PeerFailure("all_reduce #2: peer died")));
  EXPECT_THROW(w->wait(), PeerFailure);
  EXPECT_EQ(w->device_waits, 0);
}

}  // namespace
}  // namespace testing
}  // namespace nccl
}  // namespace distcomm
