#include "tests/backends/nccl/cuda_test_env.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "backends/nccl/missing_reason.h"

#if DISTCOMM_NCCL_BUILT
#include <cuda_runtime_api.h>
#endif

namespace distcomm {
namespace testing {
namespace {

struct Answer {
  int devices = 0;
  std::string reason;
};

#if DISTCOMM_NCCL_BUILT
// Runs in the child: CUDA's answer as "<count>\n<reason>".
std::string ask_cuda() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) return "0\nno CUDA device: cudaGetDeviceCount: " + std::string(cudaGetErrorString(e));
  if (count == 0) return "0\nno CUDA device: cudaGetDeviceCount found 0 devices";
  return std::to_string(count) + "\n";
}

Answer ask_cuda_in_a_child() {
  int fds[2];
  if (::pipe(fds) != 0) return {0, "no CUDA device: the test could not make a pipe to ask CUDA"};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    const std::string text = ask_cuda();
    ssize_t ignored = ::write(fds[1], text.data(), text.size());
    (void)ignored;
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string text;
  char buf[512];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  const size_t nl = text.find('\n');
  if (nl == std::string::npos) return {0, "no CUDA device: asking CUDA crashed the probe process"};
  return {std::stoi(text.substr(0, nl)), text.substr(nl + 1)};
}
#endif

const Answer& answer() {
  static std::once_flag once;
  static Answer a;
  std::call_once(once, [] {
#if DISTCOMM_NCCL_BUILT
    a = ask_cuda_in_a_child();
#else
    a = {0, DISTCOMM_NCCL_MISSING_REASON};
#endif
  });
  return a;
}

}  // namespace

std::string expected_nccl_unavailable_reason() { return answer().reason; }

int visible_cuda_devices_for_tests() { return answer().devices; }

const char* gpu_requirement() { return answer().devices == 0 ? "cuda" : "more_gpus"; }

int test_device_of_rank(int rank) { return answer().devices > 0 ? rank % answer().devices : 0; }

bool gpu_sharing_enabled() {
  const char* v = std::getenv("DISTCOMM_TEST_SHARE_GPU");
  return v && std::string(v) == "1";
}

void prepare_rank_for_nccl(int rank, int size) {
  if (!gpu_sharing_enabled() || size <= answer().devices) return;
  ::setenv("NCCL_HOSTID", ("distcomm-test-rank" + std::to_string(rank)).c_str(), 1);
  ::setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  ::setenv("NCCL_IB_DISABLE", "1", 1);
}

int gpu_ranks_that_fit(int wanted) {
  const int per_gpu = gpu_sharing_enabled() ? kRanksPerSharedGpu : 1;
  return std::max(1, std::min(wanted, answer().devices * per_gpu));
}

std::string missing_gpus(int n) {
  const int have = answer().devices;
  if (have == 0) return answer().reason;
  if (gpu_sharing_enabled()) {
    if (have * kRanksPerSharedGpu >= n) return "";
    return "needs " + std::to_string(n) + " ranks on GPUs; DISTCOMM_TEST_SHARE_GPU=1 puts at most " +
           std::to_string(kRanksPerSharedGpu) + " on each of this machine's " + std::to_string(have);
  }
  if (have < n) {
    return "needs " + std::to_string(n) + " GPUs (NCCL refuses two ranks on one GPU; DISTCOMM_TEST_SHARE_GPU=1 "
           "lets up to " + std::to_string(kRanksPerSharedGpu) + " share one over sockets); this machine has " +
           std::to_string(have);
  }
  return "";
}

}  // namespace testing
}  // namespace distcomm
