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

// DISTCOMM_TEST_SHARE_GPU=1 (tests only) lets up to kRanksPerSharedGpu ranks share a GPU.
// NCCL refuses two ranks of one host on one GPU ("Duplicate GPU detected"), but it takes
// the host's identity from NCCL_HOSTID: each rank then poses as a host of its own, and the
// ranks talk over sockets on the loopback interface (NCCL_SOCKET_IFNAME=lo,
// NCCL_IB_DISABLE=1). Slower than NVLink or shared memory, but real multi-rank NCCL on a
// machine with one GPU.
constexpr int kRanksPerSharedGpu = 3;
bool gpu_sharing_enabled();

// With sharing on and more ranks than GPUs, sets NCCL's environment for rank `rank` of
// `size` (its own NCCL_HOSTID, sockets on loopback); with a GPU per rank it changes
// nothing, so NVLink and shared memory stay in use. Must run in the rank's process before
// its first NCCL call: NCCL reads the host identity once.
void prepare_rank_for_nccl(int rank, int size);

// Why a test that needs `n` ranks on GPUs cannot run here ("" when it can), for
// GTEST_SKIP: one GPU per rank, or kRanksPerSharedGpu per GPU with sharing on.
std::string missing_gpus(int n);

// The DISTCOMM_REQUIRE name (tests/testing/require.h) of what a GPU test lacks here:
// "cuda" on a machine without a usable GPU, "more_gpus" where there are GPUs but too few.
const char* gpu_requirement();

// How many of `wanted` ranks this machine's GPUs take (at least 1 where there is a GPU).
int gpu_ranks_that_fit(int wanted);

// The GPU of a rank in the tests: rank modulo the GPUs, so shared GPUs fill evenly.
int test_device_of_rank(int rank);

}  // namespace testing
}  // namespace distcomm
