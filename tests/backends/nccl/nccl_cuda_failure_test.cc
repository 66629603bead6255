// Faults on a real GPU: an op that cannot finish in time, a peer that never arrives, a
// peer that skips a collective or dies. Each ends in a Timeout or PeerFailure naming op,
// sequence number and rank, later ops fail at once, and no process hangs.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <functional>
#include <thread>

#include "api/errors.h"
#include "api/process_group.h"
#include "tests/backends/nccl/cuda_tensor.h"
#include "tests/backends/nccl/cuda_test_env.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace testing {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

void CUDART_CB sleep_3s(void*) { std::this_thread::sleep_for(3s); }

// Waits (host) until w ends, for at most `limit`; returns its error message ("" if none).
template <typename E>
std::string error_of(const WorkPtr& w, std::chrono::seconds limit) {
  const auto deadline = Clock::now() + limit;
  while (!w->is_completed() && Clock::now() < deadline) std::this_thread::sleep_for(1ms);
  if (!w->is_completed()) return "still running after " + std::to_string(limit.count()) + " s";
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

TEST(NcclFailureTest, AnOpStuckPastItsTimeoutIsAbortedAndFailsTheGroup) {
  const std::string why = missing_gpus(1);
  if (!why.empty()) GTEST_SKIP() << why;
  run_group(1, "nccl", [](ProcessGroup& pg) {
    CudaTensor t = CudaTensor::zeros({1024}, DType::kFloat32, test_device_of_rank(pg.rank()));
    pg.all_reduce(t.tensor())->wait();  // the communicator exists: only the op can stall now
    cudaStream_t stream;
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    cudaLaunchHostFunc(stream, sleep_3s, nullptr);  // the op waits behind this
    AllReduceOptions o;
    o.cuda_stream = stream;
    o.timeout = 300ms;
    WorkPtr w = pg.all_reduce(t.tensor(), o);
    const std::string m = error_of<Timeout>(w, 10s);
    expect_contains(m, "all_reduce #1");
    expect_contains(m, "rank 0/1");
    expect_contains(m, "did not finish within 300 ms");
    expect_later_ops_fail_fast(pg, t);
    cudaStreamSynchronize(stream);
    cudaStreamDestroy(stream);
  });
}

TEST(NcclFailureTest, APeerThatNeverArrivesMakesSetupTimeOut) {
  const std::string why = missing_gpus(1);
  if (!why.empty()) GTEST_SKIP() << why;
  GroupHarnessOptions opts;
  opts.op_timeout = 3000ms;
  // Rank 1 never issues an op, so it never joins the communicator (and never touches the
  // GPU, which rank 0 may share).
  run_group(
      2, "nccl",
      [](ProcessGroup& pg) {
        if (pg.rank() == 1) return;
        CudaTensor t = CudaTensor::zeros({8}, DType::kFloat32, test_device_of_rank(0));
        const auto start = Clock::now();
        const std::string m = error_of<Timeout>(pg.all_reduce(t.tensor()), 30s);
        expect_contains(m, "rank 0 of 2 waited 3000 ms for the other ranks");
        EXPECT_LT(Clock::now() - start, 15s);
        expect_later_ops_fail_fast(pg, t);
      },
      opts);
}

// Two ranks on two GPUs with blocking waits: once a first all_reduce has set up the
// communicator, rank 1 runs `rank1_fault` (leaves, or dies) and rank 0 runs `rank0_check`.
void after_a_first_all_reduce(GroupHarnessOptions opts, const std::function<void()>& rank1_fault,
                              const std::function<void(ProcessGroup&, CudaTensor&)>& rank0_check) {
  opts.backend_config["blocking_wait"] = "1";
  run_group(
      2, "nccl",
      [&](ProcessGroup& pg) {
        CudaTensor t = CudaTensor::zeros({1 << 20}, DType::kFloat32, test_device_of_rank(pg.rank()));
        pg.all_reduce(t.tensor())->wait();
        if (pg.rank() == 1) {
          rank1_fault();
        } else {
          rank0_check(pg, t);
        }
      },
      opts);
}

TEST(NcclFailureTest, APeerThatSkipsACollectiveMakesTheOthersTimeOut) {
  const std::string why = missing_gpus(2);
  if (!why.empty()) GTEST_SKIP() << why;
  after_a_first_all_reduce(
      {}, [] {},  // rank 1 skips all_reduce #1
      [](ProcessGroup& pg, CudaTensor& t) {
        AllReduceOptions o;
        o.timeout = 2000ms;
        try {
          pg.all_reduce(t.tensor(), o)->wait();
          ADD_FAILURE() << "all_reduce #1 finished without rank 1";
        } catch (const Timeout& e) {
          expect_contains(e.what(), "all_reduce #1");
          expect_contains(e.what(), "rank 0/2");
        }
        expect_later_ops_fail_fast(pg, t);
      });
}

TEST(NcclFailureTest, APeerThatDiesFailsTheOthersInsteadOfHangingThem) {
  const std::string why = missing_gpus(2);
  if (!why.empty()) GTEST_SKIP() << why;
  GroupHarnessOptions opts;
  opts.run.may_be_killed = {1};
  after_a_first_all_reduce(
      opts, [] { ::raise(SIGKILL); },
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

}  // namespace
}  // namespace testing
}  // namespace distcomm
