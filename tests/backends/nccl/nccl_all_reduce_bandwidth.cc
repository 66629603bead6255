// all_reduce bandwidth of the nccl backend on this machine's GPUs, in nccl-tests' terms:
// one rank per GPU (distcomm::spawn), float32 sums from 1 KiB to 1 GiB (x4 steps), each
// size timed over `iters` back-to-back ops after warm-up, results checked once per size.
//
//   nccl_all_reduce_bandwidth [--nproc N] [--max_bytes B] [--iters I]
//
// algbw = bytes / time; busbw = algbw * 2 (n - 1) / n (what each link carries in a ring),
// in GB/s (1e9 bytes). Exit status 1 if any result was wrong.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "api/errors.h"
#include "api/init.h"
#include "api/spawn.h"
#include "tests/backends/nccl/cuda_tensor.h"
#include "tests/backends/nccl/cuda_test_env.h"

namespace distcomm {
namespace {

struct Flags {
  int nproc = 0;  // 0: one per visible GPU
  int64_t max_bytes = int64_t{1} << 30;
  int iters = 20;
};

Flags parse(int argc, char** argv) {
  Flags f;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const long long v = std::atoll(argv[i + 1]);
    if (k == "--nproc") f.nproc = static_cast<int>(v);
    else if (k == "--max_bytes") f.max_bytes = v;
    else if (k == "--iters") f.iters = static_cast<int>(v);
    else throw InvalidArgument("unknown flag " + k + " (expected --nproc, --max_bytes, --iters)");
  }
  if ((argc - 1) % 2 != 0) throw InvalidArgument("flags take a value: --nproc N --max_bytes B --iters I");
  return f;
}

void run_rank(int rank, int size, const Flags& f) {
  InitOptions o;
  o.backend = "nccl";
  auto pg = init_process_group(o);
  const int device = testing::test_device_of_rank(rank);
  if (rank == 0) {
    std::printf("# distcomm nccl all_reduce, float32 sum, %d rank(s), one GPU each, %d iterations\n", size, f.iters);
    std::printf("%12s %12s %10s %9s %9s %7s\n", "size(B)", "count", "time(us)", "algbw", "busbw", "#wrong");
  }
  int64_t wrong_total = 0;
  double busbw_sum = 0;
  int rows = 0;
  for (int64_t bytes = 1024; bytes <= f.max_bytes; bytes *= 4) {
    const int64_t n = bytes / 4;
    Tensor host = Tensor::empty({n}, DType::kFloat32);
    host.fill(1.0 + rank);
    testing::CudaTensor t(host, device);
    for (int i = 0; i < 5; ++i) pg->all_reduce(t.tensor())->wait();  // warm-up: connections, kernels
    cudaDeviceSynchronize();
    pg->barrier()->wait();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < f.iters; ++i) pg->all_reduce(t.tensor())->wait();
    cudaDeviceSynchronize();
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / f.iters;
    // Check: reduce fresh 1 + rank once more; every element is then size(size+1)/2.
    // Wrong values are counted on every rank and summed (on the GPU) for rank 0's row.
    testing::CudaTensor check(host, device);
    pg->all_reduce(check.tensor())->wait();
    const Tensor back = check.to_host();
    const float want = static_cast<float>(size * (size + 1) / 2);
    int64_t mine = 0;
    for (int64_t i = 0; i < n; ++i) mine += back.data_as<float>()[i] != want;
    testing::CudaTensor count(Tensor::of<int64_t>({mine}), device);
    pg->all_reduce(count.tensor())->wait();
    const auto wrong = static_cast<int64_t>(count.to_host().item(0));
    wrong_total += wrong;
    const double algbw = bytes / us / 1e3;
    const double busbw = algbw * (size > 1 ? 2.0 * (size - 1) / size : 1.0);
    busbw_sum += busbw;
    ++rows;
    if (rank == 0) std::printf("%12lld %12lld %10.1f %9.2f %9.2f %7lld\n", static_cast<long long>(bytes),
                               static_cast<long long>(n), us, algbw, busbw, static_cast<long long>(wrong));
  }
  if (rank == 0) std::printf("# Avg bus bandwidth: %.2f GB/s\n", rows ? busbw_sum / rows : 0.0);
  destroy_process_group();
  if (wrong_total) throw Error(std::to_string(wrong_total) + " wrong values (all ranks)");
}

}  // namespace
}  // namespace distcomm

int main(int argc, char** argv) {
  try {
    distcomm::Flags f = distcomm::parse(argc, argv);
    const int gpus = distcomm::testing::visible_cuda_devices_for_tests();
    if (gpus == 0) {
      std::printf("SKIPPED: %s\n", distcomm::testing::expected_nccl_unavailable_reason().c_str());
      return 0;
    }
    if (f.nproc <= 0) f.nproc = gpus;
    distcomm::spawn(f.nproc, [&](int rank, int size) { distcomm::run_rank(rank, size, f); });
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nccl_all_reduce_bandwidth: %s\n", e.what());
    return 1;
  }
}
