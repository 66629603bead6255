// What tools/gpu_check.sh needs to know before it runs the GPU suites: the CUDA devices
// this process sees (or why none), the driver and runtime versions, and NCCL's: the one
// the binaries were built against (nccl.h) and the libnccl.so.2 loaded here. Exit status
// 0 with a device, 2 without.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdio>

#include "tests/backends/nccl/cuda_test_env.h"

int main() {
  const int devices = distcomm::testing::visible_cuda_devices_for_tests();
  int driver = 0, runtime = 0, nccl = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  ncclGetVersion(&nccl);
  std::printf("gpu_probe: CUDA driver %d, runtime %d (built against %d)\n", driver, runtime, CUDART_VERSION);
  // ncclGetVersion's code is major*10000 + minor*100 + patch since NCCL 2.9.
  std::printf("gpu_probe: NCCL built against %d.%d.%d, found %d.%d.%d (libnccl.so.2 loaded here)\n", NCCL_MAJOR,
              NCCL_MINOR, NCCL_PATCH, nccl / 10000, nccl / 100 % 100, nccl % 100);
  if (devices == 0) {
    std::printf("gpu_probe: %s\n", distcomm::testing::expected_nccl_unavailable_reason().c_str());
    return 2;
  }
  for (int d = 0; d < devices; ++d) {
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, d) != cudaSuccess) {
      std::printf("gpu_probe: cuda:%d: cudaGetDeviceProperties failed\n", d);
      return 2;
    }
    int mode = 0;
    cudaDeviceGetAttribute(&mode, cudaDevAttrComputeMode, d);
    // Exclusive-process: one process per GPU, so ranks cannot share it.
    const char* mode_name = mode == cudaComputeModeDefault            ? "default"
                            : mode == cudaComputeModeExclusiveProcess ? "exclusive-process"
                            : mode == cudaComputeModeProhibited       ? "prohibited"
                                                                      : "other";
    std::printf("gpu_probe: cuda:%d %s, %.1f GiB, compute mode %s\n", d, p.name,
                static_cast<double>(p.totalGlobalMem) / (1 << 30), mode_name);
  }
  std::printf("gpu_probe: %d CUDA device(s)\n", devices);
  return 0;
}
