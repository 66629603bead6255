// all_reduce bandwidth of the nccl backend on this machine's GPUs, printed as nccl-tests'
// all_reduce_perf prints it (in place): float32 sums over a range of sizes (x4 steps),
// each timed over `iters` back-to-back ops after `warmup` ones, results checked once per
// size. One rank per GPU, or up to 3 per GPU with DISTCOMM_TEST_SHARE_GPU=1 (sockets on
// loopback: a check that many ranks work, not a measure of the GPUs).
//
//   nccl_all_reduce_bandwidth [--nproc N] [--min_bytes B] [--max_bytes B] [--iters I] [--warmup W]
//
// algbw = bytes / time; busbw = algbw * 2 (n - 1) / n (what each link carries in a ring),
// in GB/s (1e9 bytes), as nccl-tests define them. Exit status: 0 when every value was
// right, 1 when one was wrong or a rank failed, 2 without a usable GPU.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "api/errors.h"
#include "api/init.h"
#include "api/process/spawn.h"
#include "tests/backends/nccl/cuda_tensor.h"
#include "tests/backends/nccl/cuda_test_env.h"

namespace distcomm {
namespace {

struct Flags {
  int nproc = 0;  // 0: as many as the GPUs take
  int64_t min_bytes = 1024;
  int64_t max_bytes = int64_t{1} << 30;
  int iters = 20;
  int warmup = 5;
};

Flags parse(int argc, char** argv) {
  if ((argc - 1) % 2 != 0) {
    throw InvalidArgument("flags take a value: --nproc N --min_bytes B --max_bytes B --iters I --warmup W");
  }
  Flags f;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    char* end = nullptr;
    const long long v = std::strtoll(argv[i + 1], &end, 10);
    if (*end != '\0' || v < 0) throw InvalidArgument(k + " " + argv[i + 1] + ": expected a count >= 0");
    if (k == "--nproc") f.nproc = static_cast<int>(v);
    else if (k == "--min_bytes") f.min_bytes = v;
    else if (k == "--max_bytes") f.max_bytes = v;
    else if (k == "--iters") f.iters = static_cast<int>(v);
    else if (k == "--warmup") f.warmup = static_cast<int>(v);
    else throw InvalidArgument("unknown flag " + k + " (expected --nproc, --min_bytes, --max_bytes, --iters, --warmup)");
  }
  if (f.min_bytes < 4 || f.max_bytes < f.min_bytes || f.iters < 1) {
    throw InvalidArgument("need 4 <= --min_bytes <= --max_bytes and --iters >= 1");
  }
  return f;
}

// Wrong values of one size on all ranks, summed on the GPU.
int64_t wrong_values(ProcessGroup& pg, const Tensor& host, int device) {
  testing::CudaTensor t(host, device);
  pg.all_reduce(t.tensor())->wait();
  const Tensor back = t.to_host();
  const float want = static_cast<float>(pg.size() * (pg.size() + 1) / 2);  // sum of 1 + rank
  int64_t mine = 0;
  for (int64_t i = 0; i < back.numel(); ++i) mine += back.data_as<float>()[i] != want;
  testing::CudaTensor count(Tensor::of<int64_t>({mine}), device);
  pg.all_reduce(count.tensor())->wait();
  return static_cast<int64_t>(count.to_host().item(0));
}

void run_rank(int rank, int size, const Flags& f) {
  testing::prepare_rank_for_nccl(rank, size);
  InitOptions o;
  o.backend = "nccl";
  auto pg = init_process_group(o);
  const int device = testing::test_device_of_rank(rank);
  if (rank == 0) {
    std::printf("# distcomm nccl all_reduce (in place), %d rank(s)%s, %d warm-up and %d timed iterations\n", size,
                size > testing::visible_cuda_devices_for_tests() ? " sharing GPUs over sockets" : ", one GPU each",
                f.warmup, f.iters);
    std::printf("#%11s %12s %8s %6s %6s %9s %8s %8s %6s\n", "size", "count", "type", "redop", "root", "time", "algbw",
                "busbw", "#wrong");
    std::printf("#%11s %12s %8s %6s %6s %9s %8s %8s %6s\n", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)",
                "(GB/s)", "");
  }
  int64_t wrong_total = 0;
  double busbw_sum = 0;
  int rows = 0;
  for (int64_t bytes = f.min_bytes; bytes <= f.max_bytes; bytes *= 4) {
    const int64_t n = bytes / 4;
    Tensor host = Tensor::empty({n}, DType::kFloat32);
    host.fill(1.0 + rank);
    testing::CudaTensor t(host, device);
    for (int i = 0; i < f.warmup; ++i) pg->all_reduce(t.tensor())->wait();
    cudaDeviceSynchronize();
    pg->barrier()->wait();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < f.iters; ++i) pg->all_reduce(t.tensor())->wait();  // wait() holds the stream only
    cudaDeviceSynchronize();
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / f.iters;
    const int64_t wrong = wrong_values(*pg, host, device);
    wrong_total += wrong;
    const double algbw = static_cast<double>(n * 4) / us / 1e3;
    const double busbw = algbw * (size > 1 ? 2.0 * (size - 1) / size : 1.0);
    busbw_sum += busbw;
    ++rows;
    if (rank == 0) {
      std::printf(" %11lld %12lld %8s %6s %6d %9.1f %8.2f %8.2f %6lld\n", static_cast<long long>(n * 4),
                  static_cast<long long>(n), "float", "sum", -1, us, algbw, busbw, static_cast<long long>(wrong));
    }
  }
  if (rank == 0) {
    std::printf("# Out of bounds values : %lld %s\n", static_cast<long long>(wrong_total), wrong_total ? "ERROR" : "OK");
    std::printf("# Avg bus bandwidth    : %.3f\n", rows ? busbw_sum / rows : 0.0);
    std::fflush(stdout);
  }
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
      std::fprintf(stderr, "nccl_all_reduce_bandwidth: %s\n",
                   distcomm::testing::expected_nccl_unavailable_reason().c_str());
      return 2;
    }
    if (f.nproc <= 0) f.nproc = distcomm::testing::gpu_ranks_that_fit(gpus * distcomm::testing::kRanksPerSharedGpu);
    const std::string why = distcomm::testing::missing_gpus(f.nproc);
    if (!why.empty()) throw distcomm::InvalidArgument("--nproc " + std::to_string(f.nproc) + ": " + why);
    distcomm::spawn(f.nproc, [&](int rank, int size) { distcomm::run_rank(rank, size, f); });
    std::printf("nccl_all_reduce_bandwidth: %d rank(s), every value right\n", f.nproc);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nccl_all_reduce_bandwidth: %s\n", e.what());
    return 1;
  }
}
