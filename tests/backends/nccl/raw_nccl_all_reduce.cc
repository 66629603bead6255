// The baseline for nccl_all_reduce_bandwidth: the same float32 in-place all_reduce sums,
// sizes, iterations and rank placement, made with NCCL alone -- no distcomm between the
// program and ncclAllReduce. tools/gpu_check.sh runs both and prints the ratio, so that
// what distcomm adds (events, the watchdog, its checks) is measured, not assumed.
//
//   raw_nccl_all_reduce --nproc N [--min_bytes B] [--max_bytes B] [--iters I] [--warmup W]
//
// Ranks are processes forked before any CUDA call; rank 0 makes the ncclUniqueId and
// hands it to the others through pipes. Rank placement and NCCL's environment are the
// tests' (cuda_test_env.h): with ranks sharing a GPU, each poses as its own host and NCCL
// talks over sockets on loopback -- its socket path, as in the distcomm run. Timing as
// there: `iters` back-to-back all_reduces on one stream after `warmup`, synchronised once.
// Prints nccl-tests' columns; exit 0 when every value was right, 1 otherwise, 2 without a GPU.
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/backends/nccl/cuda_test_env.h"

namespace {

struct Flags {
  int nproc = 2;
  long long min_bytes = 8;
  long long max_bytes = 1ll << 26;
  int iters = 20;
  int warmup = 5;
};

Flags parse(int argc, char** argv) {
  Flags f;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const long long v = std::atoll(argv[i + 1]);
    if (k == "--nproc") f.nproc = static_cast<int>(v);
    else if (k == "--min_bytes") f.min_bytes = v;
    else if (k == "--max_bytes") f.max_bytes = v;
    else if (k == "--iters") f.iters = static_cast<int>(v);
    else if (k == "--warmup") f.warmup = static_cast<int>(v);
    else throw std::invalid_argument("unknown flag " + k);
  }
  if ((argc - 1) % 2 != 0 || f.nproc < 1 || f.min_bytes < 4 || f.max_bytes < f.min_bytes || f.iters < 1) {
    throw std::invalid_argument("usage: --nproc N --min_bytes B --max_bytes B --iters I --warmup W (4 <= min <= max)");
  }
  return f;
}

void cuda(cudaError_t e, const char* call) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(call) + ": " + cudaGetErrorString(e));
}

void nccl(ncclResult_t r, const char* call) {
  if (r != ncclSuccess) throw std::runtime_error(std::string(call) + ": " + ncclGetErrorString(r));
}

// A float kernel-free fill: the host's values copied in.
void fill(float* d, size_t n, float value, cudaStream_t s) {
  std::vector<float> host(n, value);
  cuda(cudaMemcpyAsync(d, host.data(), n * sizeof(float), cudaMemcpyHostToDevice, s), "cudaMemcpyAsync");
  cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize");
}

int run_rank(int rank, const Flags& f, const ncclUniqueId& id) {
  using Clock = std::chrono::steady_clock;
  cuda(cudaSetDevice(distcomm::testing::test_device_of_rank(rank)), "cudaSetDevice");
  ncclComm_t comm;
  nccl(ncclCommInitRank(&comm, f.nproc, id, rank), "ncclCommInitRank");
  cudaStream_t s;
  cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  float* d = nullptr;
  cuda(cudaMalloc(&d, static_cast<size_t>(f.max_bytes)), "cudaMalloc");
  if (rank == 0) {
    std::printf("# raw NCCL %d.%d.%d all_reduce (in place), %d rank(s), %d warm-up and %d timed iterations\n",
                NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, f.nproc, f.warmup, f.iters);
    std::printf("#%11s %12s %8s %6s %6s %9s %8s %8s %6s\n", "size", "count", "type", "redop", "root", "time", "algbw",
                "busbw", "#wrong");
  }
  long long wrong_total = 0;
  for (long long bytes = f.min_bytes; bytes <= f.max_bytes; bytes *= 4) {
    const size_t n = static_cast<size_t>(bytes / 4);
    fill(d, n, 1.0f + rank, s);
    for (int i = 0; i < f.warmup; ++i) nccl(ncclAllReduce(d, d, n, ncclFloat32, ncclSum, comm, s), "ncclAllReduce");
    cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    // Every rank starts the timed loop together: an all_reduce cannot end on one rank
    // before all have begun it.
    nccl(ncclAllReduce(d, d, 1, ncclFloat32, ncclSum, comm, s), "ncclAllReduce");
    cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    fill(d, n, 1.0f + rank, s);
    const auto start = Clock::now();
    for (int i = 0; i < f.iters; ++i) nccl(ncclAllReduce(d, d, n, ncclFloat32, ncclSum, comm, s), "ncclAllReduce");
    cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count() / f.iters;
    // Checked once per size: a fresh fill, one all_reduce, every element the sum of 1 + rank.
    fill(d, n, 1.0f + rank, s);
    nccl(ncclAllReduce(d, d, n, ncclFloat32, ncclSum, comm, s), "ncclAllReduce");
    std::vector<float> back(n);
    cuda(cudaMemcpyAsync(back.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync");
    cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    const float want = static_cast<float>(f.nproc * (f.nproc + 1) / 2);
    long long wrong = 0;
    for (float v : back) wrong += v != want;
    wrong_total += wrong;
    const double algbw = static_cast<double>(n * 4) / us / 1e3;
    const double busbw = algbw * (f.nproc > 1 ? 2.0 * (f.nproc - 1) / f.nproc : 1.0);
    if (rank == 0) {
      std::printf(" %11lld %12zu %8s %6s %6d %9.1f %8.2f %8.2f %6lld\n", static_cast<long long>(n * 4), n, "float",
                  "sum", -1, us, algbw, busbw, wrong);
      std::fflush(stdout);
    }
  }
  cudaFree(d);
  cudaStreamDestroy(s);
  ncclCommDestroy(comm);
  return wrong_total == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  try {
    f = parse(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "raw_nccl_all_reduce: %s\n", e.what());
    return 1;
  }
  // Asked in a child process (cuda_test_env.h): this one forks the ranks, CUDA-free.
  if (distcomm::testing::visible_cuda_devices_for_tests() == 0) {
    std::fprintf(stderr, "raw_nccl_all_reduce: %s\n", distcomm::testing::expected_nccl_unavailable_reason().c_str());
    return 2;
  }
  const std::string why = distcomm::testing::missing_gpus(f.nproc);
  if (!why.empty()) {
    std::fprintf(stderr, "raw_nccl_all_reduce: --nproc %d: %s\n", f.nproc, why.c_str());
    return 1;
  }
  std::fflush(stdout);
  // One pipe per rank but 0, for the unique id.
  std::vector<int> read_end(f.nproc, -1), write_end(f.nproc, -1);
  for (int r = 1; r < f.nproc; ++r) {
    int fds[2];
    if (::pipe(fds) != 0) {
      std::perror("raw_nccl_all_reduce: pipe");
      return 1;
    }
    read_end[r] = fds[0];
    write_end[r] = fds[1];
  }
  std::vector<pid_t> pids;
  for (int rank = 0; rank < f.nproc; ++rank) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      std::perror("raw_nccl_all_reduce: fork");
      return 1;
    }
    if (pid > 0) {
      pids.push_back(pid);
      continue;
    }
    // Only rank 0 writes: the others see the end of their pipe if it dies first.
    if (rank != 0) {
      for (int fd : write_end) {
        if (fd >= 0) ::close(fd);
      }
    }
    int status = 1;
    try {
      distcomm::testing::prepare_rank_for_nccl(rank, f.nproc);
      ncclUniqueId id;
      if (rank == 0) {
        nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
        for (int r = 1; r < f.nproc; ++r) {
          if (::write(write_end[r], &id, sizeof id) != static_cast<ssize_t>(sizeof id)) throw std::runtime_error("write id");
        }
      } else if (::read(read_end[rank], &id, sizeof id) != static_cast<ssize_t>(sizeof id)) {
        throw std::runtime_error("rank " + std::to_string(rank) + ": no unique id from rank 0");
      }
      status = run_rank(rank, f, id);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "raw_nccl_all_reduce: rank %d: %s\n", rank, e.what());
    }
    std::fflush(stdout);
    ::_exit(status);
  }
  for (int r = 1; r < f.nproc; ++r) {
    ::close(read_end[r]);
    ::close(write_end[r]);
  }
  int failed = 0;
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  if (failed) {
    std::fprintf(stderr, "raw_nccl_all_reduce: %d rank(s) failed\n", failed);
    return 1;
  }
  std::printf("raw_nccl_all_reduce: %d rank(s), every value right\n", f.nproc);
  return 0;
}
