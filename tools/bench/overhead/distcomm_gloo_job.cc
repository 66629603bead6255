#include "tools/bench/overhead/distcomm_gloo_job.h"

#include <functional>

#include "api/init.h"

namespace distcomm {
namespace bench {
namespace {

// The op at one size on tensors allocated once (zeros: sums of zeros stay zero), the
// same counts as raw_gloo_job.cc.
std::function<void()> make_op(ProcessGroup& pg, const JobSpec& spec, int64_t bytes, Tensor& in, Tensor& out) {
  const int64_t count = op_param_count(spec.op, bytes, pg.size());
  if (spec.op == "all_reduce" || spec.op == "broadcast") {
    out = Tensor::zeros({count}, DType::kFloat32);
    if (spec.op == "broadcast") return [&pg, &out] { pg.broadcast(out)->wait(); };
    return [&pg, &out] { pg.all_reduce(out)->wait(); };
  }
  const int64_t n = pg.size();
  if (spec.op == "all_gather") {
    in = Tensor::zeros({count}, DType::kFloat32);
    out = Tensor::zeros({count * n}, DType::kFloat32);
    return [&pg, &in, &out] { pg.all_gather_into_tensor(out, in)->wait(); };
  }
  in = Tensor::zeros({count * n}, DType::kFloat32);
  out = Tensor::zeros({count}, DType::kFloat32);
  return [&pg, &in, &out] { pg.reduce_scatter_tensor(out, in)->wait(); };
}

std::vector<RankLoop> gather_loops(ProcessGroup& pg, const RankLoop& mine) {
  std::vector<double> packed = pack_rank_loop(mine);
  const auto length = static_cast<int64_t>(packed.size());
  Tensor local = Tensor::from_blob(packed.data(), {length}, DType::kFloat64);
  Tensor all = Tensor::empty({length * pg.size()}, DType::kFloat64);
  pg.all_gather_into_tensor(all, local)->wait();
  std::vector<RankLoop> loops;
  const int iters = static_cast<int>(mine.times_us.size());
  for (int r = 0; r < pg.size(); ++r) loops.push_back(unpack_rank_loop(all.data_as<double>() + r * length, iters));
  return loops;
}

}  // namespace

std::vector<SizeResult> run_distcomm_rank(int rank, const JobSpec& spec, const DistcommJobOptions& options) {
  InitOptions init;
  init.backend = "gloo";
  init.init_method = "tcp://127.0.0.1:" + std::to_string(options.port);
  init.rank = rank;
  init.world_size = spec.nproc;
  init.identity = options.identity;
  init.timeout = std::chrono::seconds(300);
  if (spec.op == "all_reduce") init.backend_config["algorithm"] = options.algorithm;
  ProcessGroupPtr pg = init_process_group(init);

  std::vector<SizeResult> results;
  for (int64_t bytes : spec.sizes) {
    Tensor in, out;
    const auto op = make_op(*pg, spec, bytes, in, out);
    const RankLoop mine = time_loop(op, spec.warmup, iterations_for(spec, bytes));
    const std::vector<RankLoop> all = gather_loops(*pg, mine);
    if (rank == 0) results.push_back(summarize("distcomm", spec.op, op_bytes(spec.op, bytes, spec.nproc), all));
  }
  pg.reset();
  destroy_process_group();
  return results;
}

}  // namespace bench
}  // namespace distcomm
