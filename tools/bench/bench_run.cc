#include "tools/bench/bench_run.h"

#include <chrono>
#include <cstdint>

#include "tools/bench/collective_runner.h"
#include "tools/bench/cuda_buffers.h"
#include "tools/bench/result_check.h"
#include "tools/versions/build_versions.h"

namespace distcomm {
namespace bench {
namespace {

constexpr uint64_t kTimedSeed = 1;
constexpr uint64_t kFirstCheckSeed = 1000;

int64_t sum_over_ranks(ProcessGroup& pg, int64_t mine, int cuda_device) {
  Tensor t = Tensor::of<int64_t>({mine});
  if (cuda_device < 0) {
    pg.all_reduce(t)->wait();
  } else {
    // Through the device: a group that serves only CUDA tensors has no backend for t.
    Tensor d = cuda_empty(1, DType::kInt64, cuda_device);
    copy_host_to_device(t, d);
    pg.all_reduce(d)->wait();
    copy_device_to_host(d, t);  // the legacy stream, which wait() ordered after the op
  }
  return t.data_as<int64_t>()[0];
}

BenchRecord measure(ProcessGroup& pg, const BenchFlags& flags, int64_t requested_bytes, bool in_place) {
  using Clock = std::chrono::steady_clock;
  CollectiveRunner runner(pg, flags, requested_bytes, in_place);
  runner.fill_inputs(kTimedSeed);
  for (int i = 0; i < flags.warmup_iters; ++i) runner.run();

  const int iters = iters_at(flags, requested_bytes);
  std::vector<double> times_us(static_cast<size_t>(iters));
  // As nccl-tests starts its timed loop: every rank leaves the warm-up together, so that no
  // rank's first call is timed waiting for a late peer.
  pg.barrier()->wait();
  for (int i = 0; i < iters; ++i) {
    if (flags.data_varying) {
      // Outside the timed span; the barrier keeps a slow rank's filling out of the others'
      // times (they would otherwise wait for it inside the op).
      runner.fill_inputs(kTimedSeed + 1 + i);
      pg.barrier()->wait();
    }
    const auto start = Clock::now();
    runner.run();
    times_us[i] = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  }
  const TimingSummary t =
      summarize_times(gather_times(pg, times_us, flags.cuda_device), pg.size(), iters, flags.rank_time);

  int64_t wrong = -1;  // a barrier has no result to check: N/A, whatever -c says
  if (flags.check_iters > 0 && flags.op != BenchOp::kBarrier) {
    int64_t mine = 0;
    for (int c = 0; c < flags.check_iters; ++c) {
      const uint64_t seed = kFirstCheckSeed + c;
      runner.fill_inputs(seed);
      runner.run();
      if (flags.corrupt_for_test && c == 0) runner.corrupt_result();
      mine += runner.count_wrong(seed);
    }
    wrong = sum_over_ranks(pg, mine, flags.cuda_device);
  }

  BenchRecord r;
  r.op = bench_op_name(flags.op);
  r.backend = pg.backend_name();
  r.bytes = runner.shape().bytes(element_size(flags.dtype));
  r.requested_bytes = requested_bytes;
  r.count = runner.shape().param_count;
  r.dtype = dtype_name(flags.dtype);
  r.redop = op_reduces(flags.op) ? flags.redop.name() : "none";
  r.root = op_has_root(flags.op) ? flags.root : -1;
  r.nranks = pg.size();
  r.inplace = in_place;
  r.time_us = t.time_us;
  r.time_iter_mean_us = t.iter_mean_us;
  r.time_min_us = t.min_us;
  r.time_median_us = t.median_us;
  r.time_max_us = t.max_us;
  r.time_loop_us = t.time_us;
  r.algbw = gigabytes_per_second(r.bytes, r.time_us);
  r.busbw = r.algbw * bus_factor(flags.op, pg.size());
  r.wrong = wrong;
  r.iters = iters;
  r.timing = rank_time_name(flags.rank_time);
  return r;
}

}  // namespace

std::vector<double> gather_times(ProcessGroup& pg, std::vector<double> mine, int cuda_device) {
  const int64_t iters = static_cast<int64_t>(mine.size());
  Tensor local = Tensor::from_blob(mine.data(), {iters}, DType::kFloat64);
  Tensor all = Tensor::empty({iters * pg.size()}, DType::kFloat64);
  if (cuda_device < 0) {
    pg.all_gather_into_tensor(all, local)->wait();
  } else {
    const Tensor d_local = cuda_empty(iters, DType::kFloat64, cuda_device);
    Tensor d_all = cuda_empty(all.numel(), DType::kFloat64, cuda_device);
    copy_host_to_device(local, d_local);
    pg.all_gather_into_tensor(d_all, d_local)->wait();
    copy_device_to_host(d_all, all);
  }
  const double* p = all.data_as<double>();
  return std::vector<double>(p, p + all.numel());
}

std::string run_description(const BenchFlags& flags, const std::string& backend, int nranks) {
  const bool by_factor = flags.step_factor > 1;
  std::string s = "# distcomm bench: " + std::string(bench_op_name(flags.op)) + ", backend " + backend +
                  ", " + std::to_string(nranks) + " ranks, " + dtype_name(flags.dtype);
  if (op_reduces(flags.op)) s += " " + std::string(flags.redop.name());
  // What the run was built with, so that two runs' tables can be compared.
  s += "\n# build: " + build_versions_line();
  // The sizes measured: --sizes replaces -b/-e/-f/-i, whose defaults would describe
  // another run.
  std::string sizes;
  for (int64_t size : flags.sizes) sizes += " " + std::to_string(size);
  const bool barrier = flags.op == BenchOp::kBarrier;
  s += barrier ? std::string("\n# sizes: none, a barrier moves no data (one row)")
      : flags.sizes.empty() ? "\n# minBytes " + std::to_string(flags.min_bytes) + " maxBytes " +
                                 std::to_string(flags.max_bytes) + " step: " +
                                 std::to_string(by_factor ? flags.step_factor : flags.step_bytes) +
                                 (by_factor ? "(factor)" : "(bytes)")
                           : "\n# sizes:" + sizes + " (bytes, in this order)";
  s += std::string(" warmup iters: ") + std::to_string(flags.warmup_iters) +
       " iters: " + std::to_string(flags.iters) + " check iters: " + (barrier ? std::string("N/A (a barrier has no result)") : std::to_string(flags.check_iters)) +
       "\n# time: " + rank_time_description(flags.rank_time) + " (-a " +
       std::to_string(static_cast<int>(flags.rank_time)) +
       ") loop time: each rank times its calls after a barrier, divided by the calls, as nccl-tests; data: " + (flags.data_varying ? "fresh each iteration" : "fixed") +
       "; GB = 1e9 bytes\n";
  std::string why;
  if (!barrier && !DataPattern::checkable(flags.dtype, flags.redop, op_reduces(flags.op), nranks, &why)) {
    s += "# check: not possible here: " + why + "\n";
  }
  if (!op_has_out_of_place(flags.op)) {
    s += "# out-of-place: N/A, distcomm's " + std::string(bench_op_name(flags.op)) +
         " works in place on one tensor (as torch.distributed's does)\n";
  }
  if (!op_has_in_place(flags.op) && flags.op != BenchOp::kBarrier) {
    s += "# in-place: N/A, " + std::string(bench_op_name(flags.op)) + " has no in-place form\n";
  }
  return s + "#\n";
}

std::vector<BenchRecord> run_sweep(ProcessGroup& pg, const BenchFlags& flags, FILE* out) {
  // -c where no check can see every rank: refused on every rank before anything runs.
  check_checkable(flags, pg.size());
  const bool printing = pg.rank() == 0 && out != nullptr;
  if (printing) {
    fputs(run_description(flags, pg.backend_name(), pg.size()).c_str(), out);
    fputs(table_header().c_str(), out);
    fflush(out);
  }
  // A barrier moves no data: one row, whatever the sizes.
  const std::vector<int64_t> sizes = flags.op == BenchOp::kBarrier ? std::vector<int64_t>{0} : size_sweep(flags);
  std::vector<BenchRecord> records;
  for (int64_t size : sizes) {
    BenchRecord forms[2];
    bool present[2] = {op_has_out_of_place(flags.op), op_has_in_place(flags.op)};
    for (int in_place = 0; in_place < 2; ++in_place) {
      if (!present[in_place]) continue;
      forms[in_place] = measure(pg, flags, size, in_place == 1);
      records.push_back(forms[in_place]);
    }
    if (printing) {
      fputs(table_row(present[0] ? &forms[0] : nullptr, present[1] ? &forms[1] : nullptr).c_str(), out);
      fflush(out);
    }
  }
  if (printing) {
    fputs(table_footer(records).c_str(), out);
    fflush(out);
  }
  return records;
}

}  // namespace bench
}  // namespace distcomm
