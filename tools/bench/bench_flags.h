// Command-line flags of the benchmark, in nccl-tests' spelling (-b 8 -e 64M -f 2 ...) plus
// distcomm's own (--op, --backend, --nproc, --json, --plot). Parsing is pure so that it is
// tested without starting any rank; every mistake is an InvalidArgument naming the flag.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "api/dtype.h"
#include "api/reduce_op.h"
#include "tools/bench/bench_op.h"
#include "tools/bench/bench_record.h"

namespace distcomm {
namespace bench {

struct BenchFlags {
  BenchOp op = BenchOp::kAllReduce;
  std::string backend;  // empty: $DISTCOMM_BACKEND, else auto (init_process_group decides)
  // --config key=value,...: the backends' settings (InitOptions::backend_config), e.g.
  // shm_slot_bytes=262144, to measure a setting without rebuilding.
  std::map<std::string, std::string> backend_config;
  // nccl-tests' defaults: one size of 32 MiB.
  int64_t min_bytes = 32 << 20;
  int64_t max_bytes = 32 << 20;
  int64_t step_bytes = 1 << 20;  // used when step_factor is 1
  int64_t step_factor = 1;
  // An explicit list of sizes (--sizes), run in this order in one job: a comparison whose
  // reference runs its sizes in one process gets the same warm process. Empty: -b/-e/-f/-i.
  std::vector<int64_t> sizes;
  int iters = 20;
  // Timed iterations for sizes of 1 MiB and more (--large_iters); 0: `iters` (the anchors
  // take 200 below 1 MiB and 10 from it).
  int large_iters = 0;
  int warmup_iters = 5;
  int check_iters = 1;  // 0: no correctness check (#wrong prints N/A)
  DType dtype = DType::kFloat32;
  ReduceOp redop = ReduceOp::SUM;
  int root = 0;
  // -a N, nccl-tests' values, over the ranks' loop times (each rank's timed calls / calls):
  // 0 rank 0's, 1 the average (nccl-tests' default), 2 the fastest rank's, 3 the slowest
  // rank's (bench's default, which its published figures use).
  RankTime rank_time = RankTime::kMax;
  // --device: where the buffers live. "auto": on cuda:<local rank> when the backend is
  // nccl (which serves only CUDA tensors), else on the host; "cpu" or "cuda" to choose.
  std::string device = "auto";
  // Not a flag: the CUDA device this rank's buffers go on, which bench_main resolves from
  // --device and the local rank before the sweep; -1 for host buffers.
  int cuda_device = -1;
  int nproc = 0;         // > 0: start this many ranks here (self-launch)
  int timeout_s = 300;   // group timeout, so that a lost rank fails the run instead of hanging
  bool data_varying = false;
  std::string json_path;
  std::string plot_path;
  std::vector<std::string> plot_inputs;  // JSON files to plot instead of running
  // Hidden: the checking rank changes one element of its result before counting, so a
  // test can see a wrong value counted, reported and turned into a failing exit status.
  bool corrupt_for_test = false;
  bool help = false;
  bool version = false;  // print the version and exit
};

// "8", "64K", "1M", "2G" (binary multiples, either case). Throws InvalidArgument.
// The largest size bench takes (1 PiB): sizes and steps past it are refused, so that no sum
// or product of them overflows.
inline constexpr int64_t kMaxBenchBytes = int64_t{1} << 50;
// The most sizes one sweep may have (-b to -e by -i or -f).
inline constexpr size_t kMaxSweepSizes = 4096;
int64_t parse_size(const std::string& text, const std::string& flag = "size");

// Parses argv[1..]; throws InvalidArgument naming the flag and what was expected.
BenchFlags parse_bench_flags(const std::vector<std::string>& args);

// Refuses -r/--root outside a job of `nranks` ranks, for ops that have a root; `source`
// says where that size came from ("--nproc=3"; empty: the group's). Throws InvalidArgument.
void check_root(const BenchFlags& flags, int nranks, const std::string& source = "");

// Refuses -c N > 0 where the data pattern cannot show every rank's contribution to the
// result (the average of int8 over 128 ranks or more: result_check.h), naming the
// combination and -c 0; `source` as for check_root. Throws InvalidArgument.
void check_checkable(const BenchFlags& flags, int nranks, const std::string& source = "");

// The sizes of the sweep: --sizes as given, else min to max inclusive, times step_factor
// or plus step_bytes.
std::vector<int64_t> size_sweep(const BenchFlags& flags);

// Timed iterations at a size: large_iters from 1 MiB where set, else iters.
int iters_at(const BenchFlags& flags, int64_t bytes);

// Whether the buffers go on CUDA devices: --device cuda, or --device auto with `backend`
// (--backend, else $DISTCOMM_BACKEND) naming nccl alone.
bool uses_cuda(const BenchFlags& flags, const std::string& backend);

std::string bench_usage(const std::string& program);

}  // namespace bench
}  // namespace distcomm
