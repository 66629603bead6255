// A "cpu:gloo,cuda:nccl" group: CPU tensors go through gloo, CUDA tensors through NCCL.
// Without a GPU (the build machines) the CPU side still works and only an op on a CUDA
// tensor fails, with NCCL's reason; with GPUs both sides run.
#include <gtest/gtest.h>

#include <algorithm>

#include "api/errors.h"
#include "api/process_group.h"
#include "tests/backends/nccl/cuda_test_env.h"
#include "tests/testing/require.h"
#include "tests/testing/multiprocess.h"

#if DISTCOMM_NCCL_BUILT
#include "tests/backends/nccl/cuda_tensor.h"
#include "tests/backends/nccl/gpu_group.h"
#endif

namespace distcomm {
namespace {

// The host side: an all_reduce, a barrier (served by the CPU backend) and a broadcast.
void expect_cpu_ops_work(ProcessGroup& pg) {
  EXPECT_EQ(pg.backend_for(DeviceType::kCPU).name(), "gloo");
  Tensor t = Tensor::of<float>({1.0f + pg.rank(), 10.0f});
  pg.all_reduce(t)->wait();
  const double n = pg.size();
  EXPECT_EQ(t.to_doubles(), (std::vector<double>{n * (n + 1) / 2, 10.0 * n}));
  pg.barrier()->wait();
  Tensor b = Tensor::of<int64_t>({pg.rank() == 0 ? 42 : 0});
  pg.broadcast(b)->wait();
  EXPECT_EQ(b.item(0), 42.0);
}

TEST(NcclMixedGroupTest, WithoutAGpuCpuOpsRunThroughGlooAndCudaOpsFailWithTheReason) {
  const std::string expected = testing::expected_nccl_unavailable_reason();
  if (expected.empty()) GTEST_SKIP() << "a CUDA device is present (the next test runs both sides)";
  testing::run_group(2, "cpu:gloo,cuda:nccl", [&](ProcessGroup& pg) {
    expect_cpu_ops_work(pg);
    // Never touched: the op is refused before any backend sees the pointer.
    float not_device_memory = 0;
    Tensor cuda = Tensor::from_blob(&not_device_memory, {1}, DType::kFloat32, Device::cuda(0));
    try {
      pg.all_reduce(cuda);
      ADD_FAILURE() << "an all_reduce of a CUDA tensor ran without a CUDA device";
    } catch (const BackendUnavailable& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(expected), std::string::npos) << m;
      EXPECT_NE(m.find("all_reduce"), std::string::npos) << m;
    }
    expect_cpu_ops_work(pg);  // unharmed
  });
}

#if DISTCOMM_NCCL_BUILT
TEST(NcclMixedGroupTest, WithGpusEachDeviceTypeGoesToItsBackend) {
  const std::string why = testing::missing_gpus(1);
  if (!why.empty()) DISTCOMM_SKIP_WITHOUT(testing::gpu_requirement()) << why;
  testing::run_gpu_group(testing::gpu_ranks_that_fit(2), "cpu:gloo,cuda:nccl",
                     [](ProcessGroup& pg) {
                       EXPECT_EQ(pg.backend_for(DeviceType::kCUDA).name(), "nccl");
                       testing::CudaTensor t(Tensor::of<float>({1.0f + pg.rank()}),
                                             testing::test_device_of_rank(pg.rank()));
                       pg.all_reduce(t.tensor())->wait();
                       const double n = pg.size();
                       EXPECT_EQ(t.to_host().item(0), n * (n + 1) / 2);
                       expect_cpu_ops_work(pg);
                     });
}
#endif

}  // namespace
}  // namespace distcomm
