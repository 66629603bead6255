#include "tools/bench/overhead/raw_gloo_job.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <functional>
#include <memory>

namespace distcomm {
namespace bench {
namespace {

using Context = std::shared_ptr<::gloo::Context>;

// The op at one size, on buffers allocated once (zeros: sums of zeros stay zero).
std::function<void()> make_op(const Context& context, const JobSpec& spec, int64_t bytes, std::vector<float>& in,
                              std::vector<float>& out) {
  const int n = context->size;
  const auto count = static_cast<size_t>(op_param_count(spec.op, bytes, n));
  if (spec.op == "all_reduce") {
    out.assign(count, 0.f);
    const auto algorithm = spec.algorithm == "bcube" ? ::gloo::AllreduceOptions::Algorithm::BCUBE
                                                     : ::gloo::AllreduceOptions::Algorithm::RING;
    return [context, algorithm, &out] {
      ::gloo::AllreduceOptions o(context);
      o.setAlgorithm(algorithm);
      o.setOutput(out.data(), out.size());
      o.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&::gloo::sum<float>));
      ::gloo::allreduce(o);
    };
  }
  if (spec.op == "broadcast") {
    out.assign(count, 0.f);
    return [context, &out] {
      ::gloo::BroadcastOptions o(context);
      o.setOutput(out.data(), out.size());
      o.setRoot(0);
      ::gloo::broadcast(o);
    };
  }
  if (spec.op == "all_gather") {
    in.assign(count, 0.f);
    out.assign(count * static_cast<size_t>(n), 0.f);
    return [context, &in, &out] {
      ::gloo::AllgatherOptions o(context);
      o.setInput(in.data(), in.size());
      o.setOutput(out.data(), out.size());
      ::gloo::allgather(o);
    };
  }
  // reduce_scatter: the class reduces the whole buffer in place, each rank's block landing
  // in its own place; it is built per call, as the plugin builds its algorithm objects.
  in.assign(count * static_cast<size_t>(n), 0.f);
  return [context, count, n, &in] {
    const std::vector<int> blocks(static_cast<size_t>(n), static_cast<int>(count));
    ::gloo::ReduceScatterHalvingDoubling<float>(context, {in.data()}, static_cast<int>(in.size()), blocks).run();
  };
}

// Every rank's loop on rank 0, through gloo's allgather.
std::vector<RankLoop> gather_loops(const Context& context, const RankLoop& mine) {
  std::vector<double> packed = pack_rank_loop(mine);
  std::vector<double> all(packed.size() * static_cast<size_t>(context->size));
  ::gloo::AllgatherOptions o(context);
  o.setInput(packed.data(), packed.size());
  o.setOutput(all.data(), all.size());
  ::gloo::allgather(o);
  std::vector<RankLoop> loops;
  const int iters = static_cast<int>(mine.times_us.size());
  for (int r = 0; r < context->size; ++r) loops.push_back(unpack_rank_loop(&all[r * packed.size()], iters));
  return loops;
}

}  // namespace

std::vector<SizeResult> run_raw_gloo_rank(int rank, const std::string& store_dir, const JobSpec& spec) {
  ::gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto device = ::gloo::transport::tcp::CreateDevice(attr);
  ::gloo::rendezvous::FileStore store(store_dir);
  auto context = std::make_shared<::gloo::rendezvous::Context>(rank, spec.nproc);
  context->connectFullMesh(store, device);

  std::vector<SizeResult> results;
  for (int64_t bytes : spec.sizes) {
    std::vector<float> in, out;
    const auto op = make_op(context, spec, bytes, in, out);
    const RankLoop mine = time_loop(op, spec.warmup, iterations_for(spec, bytes));
    const std::vector<RankLoop> all = gather_loops(context, mine);
    if (rank == 0) results.push_back(summarize("raw_gloo", spec.op, op_bytes(spec.op, bytes, spec.nproc), all));
  }
  return results;
}

}  // namespace bench
}  // namespace distcomm
