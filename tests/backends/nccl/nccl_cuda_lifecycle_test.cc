// The nccl backend's life on a real GPU: destroying it with ops still queued on the GPU
// (Work::wait() does not wait for them) lets them finish first, within the shutdown
// grace; and a rank that uses one GPU gets no CUDA context on another (2 GPUs).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "api/errors.h"
#include "api/plugin/plugin_registry.h"
#include "api/store/prefix_store.h"
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

constexpr auto kHold = 1000ms;
void CUDART_CB hold_stream(void*) { std::this_thread::sleep_for(kHold); }

// A second nccl backend over the group's store, made as init_process_group makes one, so
// that the test can destroy it (the group's destructor does the same) whenever it likes.
std::unique_ptr<Backend> own_backend(ProcessGroup& pg, const std::map<std::string, std::string>& config) {
  BackendOptions o;
  o.store = std::make_shared<PrefixStore>("own backend", pg.store());
  o.rank = pg.rank();
  o.size = pg.size();
  o.group_name = "own";
  o.timeout = 60000ms;
  o.device = DeviceType::kCUDA;
  o.config = config;
  return create_backend("nccl", o);
}

OpContext context(ProcessGroup& pg, uint64_t seq) {
  OpContext ctx;
  ctx.seq = seq;
  ctx.timeout = 60000ms;
  ctx.description = "rank " + std::to_string(pg.rank()) + "/" + std::to_string(pg.size()) + " group 'own' all_reduce #" +
                    std::to_string(seq);
  return ctx;
}

struct DestroyedWithAnOpQueued {
  WorkPtr work;              // the op that was queued
  Clock::duration took{};    // the destroy
  int64_t wrong_values = 0;  // of its result, once the stream has drained
};

// Every rank: set the communicator up, then queue an all_reduce of (1 + rank) behind a
// one-second hold on a stream, wait() (which holds the stream, not the host), and destroy
// the backend at once.
DestroyedWithAnOpQueued destroy_with_an_op_queued(ProcessGroup& pg, const std::map<std::string, std::string>& config) {
  const int device = test_device_of_rank(pg.rank());
  auto backend = own_backend(pg, config);
  CudaTensor t = CudaTensor::zeros({1 << 20}, DType::kFloat32, device);
  backend->all_reduce(t.tensor(), AllReduceOptions{}, context(pg, 0))->wait();
  Tensor input = Tensor::empty(t.tensor().shape(), DType::kFloat32);
  input.fill(1.0 + pg.rank());
  cuda_check(cudaMemcpy(t.tensor().data(), input.data(), input.nbytes(), cudaMemcpyHostToDevice), "cudaMemcpy");
  cudaStream_t stream;
  cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  cuda_check(cudaLaunchHostFunc(stream, hold_stream, nullptr), "cudaLaunchHostFunc");
  AllReduceOptions o;
  o.cuda_stream = stream;
  DestroyedWithAnOpQueued d;
  d.work = backend->all_reduce(t.tensor(), o, context(pg, 1));
  d.work->wait();
  const auto start = Clock::now();
  backend.reset();
  d.took = Clock::now() - start;
  cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");  // nothing hangs
  cudaStreamDestroy(stream);
  const Tensor back = t.to_host();
  for (int64_t i = 0; i < back.numel(); ++i) d.wrong_values += back.data_as<float>()[i] != 3.0f;
  return d;
}

TEST(NcclLifecycleTest, DestroyingTheBackendLetsOpsStillQueuedOnTheGpuFinish) {
  const std::string why = missing_gpus(2);
  if (!why.empty()) DISTCOMM_SKIP_WITHOUT(gpu_requirement()) << why;
  run_gpu_group(2, "nccl", [](ProcessGroup& pg) {
    const DestroyedWithAnOpQueued d = destroy_with_an_op_queued(pg, {});
    EXPECT_GE(d.took, kHold / 2) << "the destroy did not wait for the op still queued";
    EXPECT_LT(d.took, kHold + 8s);
    EXPECT_TRUE(d.work->is_success());
    EXPECT_EQ(d.wrong_values, 0) << "the op was torn down under its kernel";
  });
}

// ncclCommAbort itself waits until the queued kernel has run and seen the abort, so the
// time says little here; the outcome says whether the op was left to finish.
TEST(NcclLifecycleTest, WithNoGraceTheDestroyAbortsWhatIsQueuedAndItFails) {
  const std::string why = missing_gpus(2);
  if (!why.empty()) DISTCOMM_SKIP_WITHOUT(gpu_requirement()) << why;
  run_gpu_group(2, "nccl", [](ProcessGroup& pg) {
    const DestroyedWithAnOpQueued d = destroy_with_an_op_queued(pg, {{"shutdown_grace_ms", "0"}});
    ASSERT_TRUE(d.work->is_completed());
    EXPECT_FALSE(d.work->is_success()) << "aborted, yet a success (its end event passed after the abort)";
    try {
      std::rethrow_exception(d.work->exception());
    } catch (const PeerFailure& e) {
      EXPECT_NE(std::string(e.what()).find("was shut down"), std::string::npos) << e.what();
    }
  });
}

// Whether `device` has an active primary context in this process (driver API through the
// runtime's entry points, so this test does not link libcuda either).
bool primary_context_active(int device) {
  void* get = nullptr;
  void* state = nullptr;
  cudaDriverEntryPointQueryResult found;
  EXPECT_EQ(cudaGetDriverEntryPointByVersion("cuDeviceGet", &get, 12000, cudaEnableDefault, &found), cudaSuccess);
  EXPECT_EQ(cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", &state, 12000, cudaEnableDefault, &found),
            cudaSuccess);
  if (!get || !state) return true;
  int handle = -1;
  unsigned int flags = 0;
  int active = 0;
  EXPECT_EQ(reinterpret_cast<int (*)(int*, int)>(get)(&handle, device), 0);
  EXPECT_EQ(reinterpret_cast<int (*)(int, unsigned int*, int*)>(state)(handle, &flags, &active), 0);
  return active != 0;
}

// Every rank used to get a context (about 0.5 GiB) on GPU 0: the watchdog thread's first
// CUDA call made one there, and restoring "the previous device" of a thread that never
// chose one made device 0 current. A Work's event queried or destroyed on such a thread
// would do the same.
TEST(NcclLifecycleTest, ARankOnOneGpuMakesNoContextOnAnother) {
  const std::string why = missing_gpus(1);
  if (!why.empty()) DISTCOMM_SKIP_WITHOUT(gpu_requirement()) << why;
  if (visible_cuda_devices_for_tests() < 2) DISTCOMM_SKIP_WITHOUT("more_gpus") << "needs 2 GPUs: the rank uses cuda:1, cuda:0 stays untouched";
  run_gpu_group(1, "nccl", [](ProcessGroup& pg) {
    CudaTensor t(Tensor::of<float>({1.0f, 2.0f}), 1);
    pg.all_reduce(t.tensor())->wait();
    pg.barrier()->wait();
    // A thread that never chose a device issues an op too.
    std::thread([&] { pg.all_reduce(t.tensor())->wait(); }).join();
    // And one polls a Work (is_completed asks its event) and lets go of it.
    WorkPtr polled = pg.all_reduce(t.tensor());
    std::thread([w = std::move(polled)]() mutable {
      while (!w->is_completed()) std::this_thread::yield();
      w.reset();
    }).join();
    std::this_thread::sleep_for(50ms);  // the watchdog has polled
    EXPECT_FALSE(primary_context_active(0)) << "a context appeared on cuda:0 while the rank ran on cuda:1";
    pg.abort();  // communicators aborted, the watchdog stopped
    EXPECT_FALSE(primary_context_active(0)) << "a context appeared on cuda:0 at shutdown";
    EXPECT_TRUE(primary_context_active(1));
  });
}

}  // namespace
}  // namespace testing
}  // namespace distcomm
