// What the nccl tests expect of this machine, asked of CUDA directly rather than of the
// plugin under test.
//
// CUDA must not be initialised in a process that later forks ranks (the children's CUDA
// calls would fail), so the question is asked in a short-lived child process and the
// answer kept; test processes that fork ranks stay CUDA-free.
#pragma once

#include <string>

namespace distcomm {
namespace testing {

// The reason the nccl plugin's available() probe must give here, in its exact words:
// "no CUDA device: cudaGetDeviceCount: <CUDA's message>" without a usable GPU, the build's
// reason where the plugin was built without CUDA or NCCL, and "" where a device is present.
std::string expected_nccl_unavailable_reason();

// CUDA devices this process would see (0 when none or when built without CUDA).
int visible_cuda_devices_for_tests();

// Why a test that needs `n` GPUs cannot run here ("" when it can), for GTEST_SKIP. NCCL
// refuses two ranks on one GPU, so a test of n ranks needs n GPUs.
std::string missing_gpus(int n);

// The GPU of a rank in the tests: one per rank, in rank order.
int test_device_of_rank(int rank);

}  // namespace testing
}  // namespace distcomm
