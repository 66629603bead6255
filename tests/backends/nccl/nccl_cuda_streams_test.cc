// The nccl backend's stream contract on a real GPU (one GPU suffices; two ranks with
// DISTCOMM_TEST_SHARE_GPU=1): an op starts after the work already queued on the caller's
// stream (the options', or the thread's CudaStreamGuard); Work::wait() holds that stream,
// or the one named in wait(stream), not the host; "blocking_wait" holds the host. Also
// what is refused before anything is sent: a stream being captured into a CUDA graph.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <thread>

#include "api/cuda_stream.h"
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

// Host function queued on a stream: holds everything queued after it for a while, so an
// op that did not wait for the stream would visibly run too early.
constexpr int kHoldMs = 400;
void CUDART_CB hold_stream(void*) { std::this_thread::sleep_for(std::chrono::milliseconds(kHoldMs)); }

// Pinned host words: `in` is copied to the device behind the hold, `out` receives the
// result. Two words, because the copy in is still queued when the host reads the result
// back, and a word reused for both would be overwritten before it was sent.
struct Pinned {
  Pinned() {
    cuda_check(cudaMallocHost(reinterpret_cast<void**>(&in), sizeof(float)), "cudaMallocHost");
    cuda_check(cudaMallocHost(reinterpret_cast<void**>(&out), sizeof(float)), "cudaMallocHost");
  }
  ~Pinned() {
    cudaFreeHost(in);
    cudaFreeHost(out);
  }
  float* in = nullptr;
  float* out = nullptr;
};

struct StreamedAllReduce {
  WorkPtr work;
  Clock::duration wait_took{};
  float result = 0;
};

// On `stream`: hold, then write 3.0 into t, then all_reduce PREMUL_SUM(2) ordered after
// the stream, then copy back. Every rank contributes 2 * 3, so the result is 6 * size; an
// op that ran before the write would see zeros or only its own 3.
// How the op learns its stream, and which stream its wait() holds.
enum class StreamBy { kOptions, kGuard };

StreamedAllReduce streamed_all_reduce(ProcessGroup& pg, CudaTensor& t, cudaStream_t stream,
                                      StreamBy by = StreamBy::kOptions) {
  // The communicator is set up (and its connections made) before the timed part: setup
  // waits for the peers and would eat the hold.
  pg.all_reduce(t.tensor())->wait();
  cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  Pinned words;
  *words.in = 3.0f;
  *words.out = -1.0f;
  StreamedAllReduce s;
  cuda_check(cudaLaunchHostFunc(stream, hold_stream, nullptr), "cudaLaunchHostFunc");
  cuda_check(cudaMemcpyAsync(t.tensor().data(), words.in, sizeof(float), cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync");
  AllReduceOptions o;
  o.op = ReduceOp::premul_sum(2.0);
  std::optional<CudaStreamGuard> guard;
  if (by == StreamBy::kOptions) {
    o.cuda_stream = stream;
  } else {
    guard.emplace(stream);  // no cuda_stream in the options: the thread's current stream
  }
  s.work = pg.all_reduce(t.tensor(), o);
  const auto start = Clock::now();
  s.work->wait();
  s.wait_took = Clock::now() - start;
  guard.reset();
  cuda_check(cudaMemcpyAsync(words.out, t.tensor().data(), sizeof(float), cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync");
  cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  s.result = *words.out;
  return s;
}

// An all_reduce of t on `stream` is refused with an InvalidArgument saying `why`.
void expect_refused_on(ProcessGroup& pg, CudaTensor& t, cudaStream_t stream, const std::string& why) {
  AllReduceOptions o;
  o.cuda_stream = stream;
  try {
    pg.all_reduce(t.tensor(), o);
    ADD_FAILURE() << "an all_reduce on the stream was taken (expected: " << why << ")";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
  }
}

class NcclStreamsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = missing_gpus(1);
    if (!why.empty()) DISTCOMM_SKIP_WITHOUT(gpu_requirement()) << why;
  }
  int world() const { return gpu_ranks_that_fit(2); }
};

// The stream comes from the options, or (issue 31 #4) from one CudaStreamGuard that gives
// every op of the thread its stream, as c10's CUDAStreamGuard, without a cuda_stream in
// each call; wait() then holds the guard's stream.
TEST_F(NcclStreamsTest, OpsRunAfterTheCallersStreamAndWaitHoldsTheStreamNotTheHost) {
  run_gpu_group(world(), "nccl", [](ProcessGroup& pg) {
    CudaTensor t = CudaTensor::zeros({1}, DType::kFloat32, test_device_of_rank(pg.rank()));
    cudaStream_t stream;
    cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    for (StreamBy by : {StreamBy::kOptions, StreamBy::kGuard}) {
      SCOPED_TRACE(by == StreamBy::kOptions ? "options.cuda_stream" : "CudaStreamGuard");
      StreamedAllReduce s = streamed_all_reduce(pg, t, stream, by);
      EXPECT_EQ(s.result, 6.0f * pg.size()) << "the op did not wait for the caller's stream, or the copy "
                                               "back did not wait for the op";
      EXPECT_LT(s.wait_took, std::chrono::milliseconds(kHoldMs / 2)) << "wait() blocked the host";
    }
    cudaStreamDestroy(stream);
  });
}

// Work::wait(stream): another stream than the op's waits for it. The op runs after a hold
// on `first`; a copy queued on `second` right after wait(second) sees the op's result.
TEST_F(NcclStreamsTest, WaitOnAStreamMakesThatStreamWait) {
  run_gpu_group(world(), "nccl", [](ProcessGroup& pg) {
    CudaTensor t = CudaTensor::zeros({1}, DType::kFloat32, test_device_of_rank(pg.rank()));
    pg.all_reduce(t.tensor())->wait();  // set up before the timed part
    cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    cudaStream_t first, second;
    cuda_check(cudaStreamCreateWithFlags(&first, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    cuda_check(cudaStreamCreateWithFlags(&second, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    Pinned words;
    *words.in = 3.0f;
    *words.out = -1.0f;
    cuda_check(cudaLaunchHostFunc(first, hold_stream, nullptr), "cudaLaunchHostFunc");
    cuda_check(cudaMemcpyAsync(t.tensor().data(), words.in, sizeof(float), cudaMemcpyHostToDevice, first),
               "cudaMemcpyAsync");
    AllReduceOptions o;
    o.cuda_stream = first;
    WorkPtr w = pg.all_reduce(t.tensor(), o);
    w->wait(second);
    cuda_check(cudaMemcpyAsync(words.out, t.tensor().data(), sizeof(float), cudaMemcpyDeviceToHost, second),
               "cudaMemcpyAsync");
    cuda_check(cudaStreamSynchronize(second), "cudaStreamSynchronize");
    EXPECT_EQ(*words.out, 3.0f * pg.size()) << "the copy on the second stream did not wait for the op";
    cuda_check(cudaStreamSynchronize(first), "cudaStreamSynchronize");
    cudaStreamDestroy(first);
    cudaStreamDestroy(second);
  });
}

// Issue 31 #2: an op on a stream being captured into a CUDA graph is refused before
// anything is sent (its end event could not be polled, and the watchdog would fail the
// group), the capture is not broken by it, and the group goes on.
TEST_F(NcclStreamsTest, AStreamBeingCapturedIsRefusedAndTheGroupGoesOn) {
  run_gpu_group(world(), "nccl", [](ProcessGroup& pg) {
    CudaTensor t(Tensor::of<float>({1.0f}), test_device_of_rank(pg.rank()));
    pg.all_reduce(t.tensor())->wait();  // set up: the barrier scratch and communicator exist
    cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    cudaStream_t capturing;
    cuda_check(cudaStreamCreateWithFlags(&capturing, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    cuda_check(cudaStreamBeginCapture(capturing, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
    expect_refused_on(pg, t, capturing, "being captured into a CUDA graph");
    {
      CudaStreamGuard on(capturing);
      EXPECT_THROW(pg.all_reduce(t.tensor()), InvalidArgument) << "the guard's stream is checked too";
    }
    cudaGraph_t graph = nullptr;
    EXPECT_EQ(cudaStreamEndCapture(capturing, &graph), cudaSuccess) << "the refused op broke the capture";
    if (graph) cudaGraphDestroy(graph);
    cudaStreamDestroy(capturing);
    pg.all_reduce(t.tensor())->wait();
    EXPECT_EQ(t.to_host().item(0), 1.0 * pg.size() * pg.size());
  });
}

TEST_F(NcclStreamsTest, BlockingWaitHoldsTheHostUntilTheOpEnds) {
  GroupHarnessOptions opts;
  opts.backend_config["blocking_wait"] = "1";
  run_gpu_group(
      world(), "nccl",
      [](ProcessGroup& pg) {
        CudaTensor t = CudaTensor::zeros({1}, DType::kFloat32, test_device_of_rank(pg.rank()));
        cudaStream_t stream;
        cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
        StreamedAllReduce s = streamed_all_reduce(pg, t, stream);
        EXPECT_TRUE(s.work->is_completed());
        // The hold began before the op was issued; issuing takes well under 100 ms.
        EXPECT_GE(s.wait_took, std::chrono::milliseconds(kHoldMs * 3 / 4)) << "wait() returned early";
        EXPECT_EQ(s.result, 6.0f * pg.size());
        cudaStreamDestroy(stream);
      },
      opts);
}

TEST_F(NcclStreamsTest, WorkCompletesOnItsOwnAndManyOpsMayBeInFlight) {
  run_gpu_group(world(), "nccl", [](ProcessGroup& pg) {
    const int device = test_device_of_rank(pg.rank());
    std::vector<CudaTensor> tensors;
    std::vector<WorkPtr> works;
    for (int i = 0; i < 50; ++i) tensors.emplace_back(Tensor::of<int32_t>({i, 1}), device);
    for (auto& t : tensors) works.push_back(pg.all_reduce(t.tensor()));
    for (auto& w : works) w->wait();
    for (int i = 0; i < 50; ++i) {
      EXPECT_EQ(tensors[i].to_host().to_doubles(), (std::vector<double>{1.0 * i * pg.size(), 1.0 * pg.size()}));
    }
    // The watchdog (or is_completed's own query) ends every Work without a host wait.
    const auto deadline = Clock::now() + 10s;
    for (auto& w : works) {
      while (!w->is_completed() && Clock::now() < deadline) std::this_thread::sleep_for(1ms);
      EXPECT_TRUE(w->is_success());
    }
  });
}

TEST_F(NcclStreamsTest, WhatNcclCannotDoIsRefusedBeforeAnythingIsSent) {
  run_gpu_group(world(), "nccl", [](ProcessGroup& pg) {
    const int device = test_device_of_rank(pg.rank());
    CudaTensor ints(Tensor::of<int32_t>({1, 2, 3}), device);
    AllReduceOptions band;
    band.op = ReduceOp::BAND;
    try {
      pg.all_reduce(ints.tensor(), band);
      ADD_FAILURE() << "BAND on int32 was accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("NCCL has no bitwise reductions"), std::string::npos) << e.what();
    }
    Tensor elsewhere = Tensor::from_blob(ints.tensor().data(), {3}, DType::kInt32,
                                         Device::cuda(visible_cuda_devices_for_tests()));
    EXPECT_THROW(pg.all_reduce(elsewhere), InvalidArgument);
    Tensor host = Tensor::of<float>({1.0f});
    EXPECT_THROW(pg.all_reduce(host), InvalidArgument) << "backend nccl has no CPU side";
    // Nothing was sent: the group goes on.
    pg.all_reduce(ints.tensor())->wait();
    EXPECT_EQ(ints.to_host().item(2), 3.0 * pg.size());
  });
}

// A stream of another GPU cannot order the op: refused before anything is sent, and the
// group goes on (it used to fail the whole group).
TEST_F(NcclStreamsTest, AStreamOfAnotherGpuIsRefusedAndTheGroupGoesOn) {
  if (visible_cuda_devices_for_tests() < 2) DISTCOMM_SKIP_WITHOUT("more_gpus") << "needs 2 GPUs, for a stream of the other one";
  run_gpu_group(1, "nccl", [](ProcessGroup& pg) {
    CudaTensor t(Tensor::of<float>({1.0f}), 0);
    cuda_check(cudaSetDevice(1), "cudaSetDevice");
    cudaStream_t other;
    cuda_check(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    cuda_check(cudaSetDevice(0), "cudaSetDevice");
    expect_refused_on(pg, t, other, "was given a CUDA stream of cuda:1");
    pg.all_reduce(t.tensor())->wait();
    EXPECT_EQ(t.to_host().item(0), 1.0);
    cudaStreamDestroy(other);
  });
}

}  // namespace
}  // namespace testing
}  // namespace distcomm
