// Faults on a real GPU: an op that cannot finish in time, a peer that never arrives, a
// peer that skips a collective or dies, an abort from another thread during setup. Each
// ends in a Timeout or PeerFailure naming op, sequence number and rank, no op caught in it
// passes as a success, later ops fail at once, and no process hangs. Two-rank cases run
// on one GPU with DISTCOMM_TEST_SHARE_GPU=1.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <functional>
#include <future>
#include <thread>

#include "api/errors.h"
#include "api/process_group.h"
#include "tests/backends/nccl/cuda_tensor.h"
#include "tests/backends/nccl/cuda_test_env.h"
#include "tests/testing/require.h"
#include "tests/backends/nccl/gpu_group.h"

namespace distcomm {
namespace testing {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

void CUDART_CB sleep_3s(void*) { std::this_thread::sleep_for(3s); }

// Polls w as callers do (is_completed asks the GPU) until it ends, for at most `limit`;
// returns its error message ("" if it succeeded).
template <typename E>
std::string error_of(const WorkPtr& w, std::chrono::seconds limit) {
  const auto deadline = Clock::now() + limit;
  while (!w->is_completed() && Clock::now() < deadline) std::this_thread::sleep_for(100us);
  if (!w->is_completed()) return "still running after " + std::to_string(limit.count()) + " s";
  if (w->is_success()) return "";
  try {
    std::rethrow_exception(w->exception());
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("unexpected error type: ") + e.what();
  }
  return "";
}

void expect_contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in: " << text;
}

// The next op fails at once with the first fault instead of running.
void expect_later_ops_fail_fast(ProcessGroup& pg, CudaTensor& t) {
  const auto start = Clock::now();
  try {
    pg.all_reduce(t.tensor())->wait();
    ADD_FAILURE() << "an op after a fault ran";
  } catch (const Error&) {
  }
  EXPECT_LT(Clock::now() - start, 1s);
}

// A rank that leaves its part undone stays alive until rank 0 has checked what it
// wanted: a peer that exits would close its sockets, and rank 0 would see a PeerFailure
// where the case is about a timeout.
void hold_until_rank0_is_done(ProcessGroup& pg) { pg.store()->wait({"rank0 done"}, 120000ms); }
void release_the_others(ProcessGroup& pg) { pg.store()->set("rank0 done", "1"); }

TEST(NcclFailureTest, AnOpStuckPastItsTimeoutIsAbortedAndFailsTheGroup) {
  const std::string why = missing_gpus(1);
  if (!why.empty()) DISTCOMM_SKIP_WITHOUT(gpu_requirement()) << why;
  run_gpu_group(1, "nccl", [](ProcessGroup& pg) {
    CudaTensor t = CudaTensor::zeros({1024}, DType::kFloat32, test_device_of_rank(pg.rank()));
    pg.all_reduce(t.tensor())->wait();  // the communicator exists: only the op can stall now
    cudaStream_t stream;
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    cudaLaunchHostFunc(stream, sleep_3s, nullptr);  // the ops wait behind this
    AllReduceOptions o;
    o.cuda_stream = stream;
    o.timeout = 300ms;
    WorkPtr stuck = pg.all_reduce(t.tensor(), o);
    o.timeout = 60000ms;
    WorkPtr behind = pg.all_reduce(t.tensor(), o);
    const std::string m = error_of<Timeout>(stuck, 10s);
    expect_contains(m, "all_reduce #1");
    expect_contains(m, "rank 0/1");
    expect_contains(m, "did not finish within 300 ms");
    // It ends with the group's refusal (quoting #1's timeout); its end event passes once
    // the hold is over, but it was aborted, so it is no success.
    const std::string b = error_of<Error>(behind, 10s);
    expect_contains(b, "all_reduce #2");
    expect_contains(b, "the group is unusable since an earlier failure");
    expect_later_ops_fail_fast(pg, t);
    cudaStreamSynchronize(stream);
    EXPECT_FALSE(behind->is_success());
    cudaStreamDestroy(stream);
  });
}

TEST(NcclFailureTest, APeerThatNeverArrivesMakesSetupTimeOut) {
  const std::string why = missing_gpus(1);
  if (!why.empty()) DISTCOMM_SKIP_WITHOUT(gpu_requirement()) << why;
  GroupHarnessOptions opts;
  opts.op_timeout = 3000ms;
  // Rank 1 never issues an op, so it never joins the communicator (and never touches the
  // GPU, which rank 0 may share).
  run_gpu_group(
      2, "nccl",
      [](ProcessGroup& pg) {
        if (pg.rank() == 1) return hold_until_rank0_is_done(pg);
        CudaTensor t = CudaTensor::zeros({8}, DType::kFloat32, test_device_of_rank(0));
        const auto start = Clock::now();
        const std::string m = error_of<Timeout>(pg.all_reduce(t.tensor()), 30s);
        expect_contains(m, "rank 0 of 2 waited 3000 ms for the other ranks");
        EXPECT_GE(Clock::now() - start, 3000ms);
        EXPECT_LT(Clock::now() - start, 15s);
        expect_later_ops_fail_fast(pg, t);
        release_the_others(pg);
      },
      opts);
}

// Two ranks with blocking waits: once a first all_reduce has set up the communicator,
// rank 1 runs `rank1_fault` (skips an op, or dies) and rank 0 runs `rank0_check`.
void after_a_first_all_reduce(GroupHarnessOptions opts, const std::function<void(ProcessGroup&)>& rank1_fault,
                              const std::function<void(ProcessGroup&, CudaTensor&)>& rank0_check) {
  opts.backend_config["blocking_wait"] = "1";
  run_gpu_group(
      2, "nccl",
      [&](ProcessGroup& pg) {
        CudaTensor t = CudaTensor::zeros({1 << 20}, DType::kFloat32, test_device_of_rank(pg.rank()));
        pg.all_reduce(t.tensor())->wait();
        if (pg.rank() == 1) {
          rank1_fault(pg);
        } else {
          rank0_check(pg, t);
          release_the_others(pg);
        }
      },
      opts);
}

// Also with blocking NCCL calls (nonblocking=0): the watchdog's abort must not wait for
// the lock of a call in progress.
class NcclSkippedCollectiveTest : public ::testing::TestWithParam<bool> {};

TEST_P(NcclSkippedCollectiveTest, APeerThatSkipsACollectiveMakesTheOthersTimeOutAndNothingSucceeds) {
  const std::string why = missing_gpus(2);
  if (!why.empty()) DISTCOMM_SKIP_WITHOUT(gpu_requirement()) << why;
  GroupHarnessOptions opts;
  opts.backend_config["nonblocking"] = GetParam() ? "1" : "0";
  after_a_first_all_reduce(
      opts, hold_until_rank0_is_done,  // rank 1 skips all_reduce #1 and #2
      [](ProcessGroup& pg, CudaTensor& t) {
        AllReduceOptions o;
        o.timeout = 2000ms;
        WorkPtr first = pg.all_reduce(t.tensor(), o);
        // Queued behind #1: its kernel exits when the watchdog aborts the communicator,
        // and its end event fires; it must still fail.
        CudaTensor other = CudaTensor::zeros({1 << 20}, DType::kFloat32, test_device_of_rank(0));
        o.timeout = 60000ms;
        WorkPtr second = pg.all_reduce(other.tensor(), o);
        const std::string m = error_of<Timeout>(first, 30s);
        expect_contains(m, "all_reduce #1");
        expect_contains(m, "rank 0/2");
        const std::string s = error_of<Error>(second, 30s);
        expect_contains(s, "all_reduce #2");
        expect_contains(s, "the group is unusable since an earlier failure");
        EXPECT_FALSE(first->is_success());
        EXPECT_FALSE(second->is_success());
        expect_later_ops_fail_fast(pg, t);
      });
}

INSTANTIATE_TEST_SUITE_P(NcclCalls, NcclSkippedCollectiveTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "nonblocking" : "blocking"; });

TEST(NcclFailureTest, APeerThatDiesFailsTheOthersInsteadOfHangingThem) {
  const std::string why = missing_gpus(2);
  if (!why.empty()) DISTCOMM_SKIP_WITHOUT(gpu_requirement()) << why;
  GroupHarnessOptions opts;
  opts.run.may_be_killed = {1};
  after_a_first_all_reduce(
      opts, [](ProcessGroup&) { ::raise(SIGKILL); },
      [](ProcessGroup& pg, CudaTensor& t) {
        AllReduceOptions o;
        o.timeout = 10000ms;
        const auto start = Clock::now();
        try {
          pg.all_reduce(t.tensor(), o)->wait();
          ADD_FAILURE() << "all_reduce #1 finished with rank 1 dead";
        } catch (const PeerFailure& e) {
          expect_contains(e.what(), "all_reduce #1");
        } catch (const Timeout& e) {
          expect_contains(e.what(), "all_reduce #1");
        }
        EXPECT_LT(Clock::now() - start, 20s);
      });
}

// Issue 31 #1: `send(x)->wait(); all_reduce(y)` on the legacy stream with the peer gone
// quiet: the all_reduce's kernel waits behind the stuck send on another communicator. The
// send's timeout aborts every communicator; aborted in sequence, group first, the group's
// ncclCommAbort waited for its stream for ever, and so did the watchdog and the group's
// destruction. Now they are aborted together: both ops fail and the group goes away.
TEST(NcclFailureTest, AStuckSendWithACollectiveQueuedBehindItIsAbortedWithoutAHang) {
  const std::string why = missing_gpus(2);
  if (!why.empty()) DISTCOMM_SKIP_WITHOUT(gpu_requirement()) << why;
  run_gpu_group(2, "nccl", [](ProcessGroup& pg) {
    const int device = test_device_of_rank(pg.rank());
    // Both communicators are set up first: the group's, then the pair's.
    CudaTensor t = CudaTensor::zeros({1024}, DType::kFloat32, device);
    pg.all_reduce(t.tensor())->wait();
    CudaTensor one = CudaTensor::zeros({1}, DType::kFloat32, device);
    if (pg.rank() == 1) {
      pg.recv(one.tensor(), 0)->wait();
      cudaDeviceSynchronize();
      return hold_until_rank0_is_done(pg);  // and receives nothing more
    }
    pg.send(one.tensor(), 1)->wait();
    cudaDeviceSynchronize();
    CudaTensor big = CudaTensor::zeros({int64_t{16} << 20}, DType::kFloat32, device);
    P2POptions p2p;
    p2p.timeout = 2000ms;
    const auto start = Clock::now();
    WorkPtr send = pg.send(big.tensor(), 1, p2p);
    send->wait();  // not blocking: the legacy stream now waits for the send, which never ends
    AllReduceOptions o;
    o.timeout = 60000ms;
    WorkPtr behind = pg.all_reduce(t.tensor(), o);  // on the legacy stream: behind the send
    const std::string m = error_of<Timeout>(send, 30s);
    expect_contains(m, "send");
    expect_contains(m, "did not finish within 2000 ms");
    const std::string b = error_of<Error>(behind, 30s);
    expect_contains(b, "all_reduce #1");
    EXPECT_FALSE(behind->is_success());
    EXPECT_LT(Clock::now() - start, 30s);
    expect_later_ops_fail_fast(pg, t);
    release_the_others(pg);
  });
}

// ProcessGroup::abort() gives nothing in flight the shutdown grace a destroy gives: an op
// whose peer never comes is aborted at once and fails.
TEST(NcclFailureTest, AnAbortDoesNotWaitTheShutdownGraceForAnOpThatCannotEnd) {
  const std::string why = missing_gpus(2);
  if (!why.empty()) DISTCOMM_SKIP_WITHOUT(gpu_requirement()) << why;
  GroupHarnessOptions opts;
  opts.backend_config["shutdown_grace_ms"] = "60000";
  after_a_first_all_reduce(
      opts, hold_until_rank0_is_done,  // rank 1 never joins all_reduce #1
      [](ProcessGroup& pg, CudaTensor& t) {
        AllReduceOptions o;
        o.timeout = 120000ms;
        WorkPtr stuck = pg.all_reduce(t.tensor(), o);
        const auto start = Clock::now();
        pg.abort();
        EXPECT_LT(Clock::now() - start, 20s) << "abort() waited for the 60 s shutdown grace";
        const std::string m = error_of<PeerFailure>(stuck, 10s);
        expect_contains(m, "all_reduce #1");
        expect_contains(m, "ProcessGroup::abort()");
        EXPECT_FALSE(stuck->is_success());
      });
}

// A thread waits in setup for a peer that does not come; abort() from another thread
// ends that wait at once instead of after the group's timeout, and does not itself wait
// on the peer.
TEST(NcclFailureTest, AnAbortFromAnotherThreadEndsASetupThatWaitsForAPeer) {
  const std::string why = missing_gpus(1);
  if (!why.empty()) DISTCOMM_SKIP_WITHOUT(gpu_requirement()) << why;
  GroupHarnessOptions opts;
  opts.op_timeout = 60000ms;
  run_gpu_group(
      2, "nccl",
      [](ProcessGroup& pg) {
        if (pg.rank() == 1) return hold_until_rank0_is_done(pg);
        CudaTensor t = CudaTensor::zeros({8}, DType::kFloat32, test_device_of_rank(0));
        auto issued = std::async(std::launch::async, [&] { return pg.all_reduce(t.tensor()); });
        EXPECT_EQ(issued.wait_for(500ms), std::future_status::timeout) << "setup ended without rank 1";
        auto start = Clock::now();
        pg.abort();
        EXPECT_LT(Clock::now() - start, 5s) << "abort() waited";
        ASSERT_EQ(issued.wait_for(10s), std::future_status::ready) << "the setup did not see the abort";
        EXPECT_LT(Clock::now() - start, 10s);
        const std::string m = error_of<PeerFailure>(issued.get(), 1s);
        expect_contains(m, "all_reduce #0");
        expect_contains(m, "was shut down");
        release_the_others(pg);
      },
      opts);
}

}  // namespace
}  // namespace testing
}  // namespace distcomm
