// reduce_scatter by hosts. Hosts of one size L, H hosts: every rank lays its input out in
// (local rank, host) order, so that a reduce_scatter within the host leaves local rank l
// the host's sum of the blocks of local rank l of every host; a reduce_scatter across, with
// local rank l of every host (the L groups at once), leaves each rank the sum of its own
// block. What leaves a host is (H - 1) blocks per local rank, where a flat ring sends each
// link (N - 1). Hosts of different sizes: every rank lays its input out by host (each
// host's blocks padded to the largest host's count), a reduce within to local rank 0, a
// reduce_scatter among the hosts' local ranks 0, a broadcast within.
#include "api/hier/hier_schedule.h"

namespace distcomm {
namespace hier {
namespace {

void through_local_rank_0(OpRun& run, Tensor& output, const Tensor& input, ReduceOp op) {
  const Levels& lv = run.levels;
  const int64_t n = output.numel();
  const int hosts = lv.host_count();
  const int most = lv.largest_host();
  const int mine = lv.local_count(lv.host);
  // Host h's blocks at h * most (padding: reduced with the rest, then dropped).
  Tensor by_host = run.scratch.get(Scratch::kWhole, hosts * most * n, input.dtype());
  for (int h = 0; h < hosts; ++h) {
    const int count = lv.local_count(h);
    for (int l = 0; l < count; ++l) {
      by_host.flat_slice((h * most + l) * n, n).copy_from(input.flat_slice(lv.rank_at(h, l) * n, n));
    }
    if (count < most) by_host.flat_slice((h * most + count) * n, (most - count) * n).fill(0);
  }
  ReduceOptions to_leader;
  to_leader.op = op;
  lv.within->reduce(by_host, run.timed(to_leader))->wait();
  // The host's part to every rank of the host, which keeps its block (a broadcast, not a
  // scatter: shm's scatter moves about 0.1 GB/s, its broadcast several GB/s).
  Tensor host_part = run.scratch.get(Scratch::kPart, most * n, input.dtype());
  if (lv.local == 0) {
    ReduceScatterOptions rs;
    rs.op = op;
    lv.across->reduce_scatter_tensor(host_part, by_host, run.timed(rs))->wait();
  }
  Tensor ours = host_part.flat_slice(0, mine * n);
  lv.within->broadcast(ours, run.timed(BroadcastOptions{}))->wait();
  output.copy_from(host_part.flat_slice(lv.local * n, n));
}

}  // namespace

void reduce_scatter(OpRun& run, Tensor& output_tensor, const Tensor& input_tensor, ReduceOp op) {
  const Levels& lv = run.levels;
  const int64_t n = output_tensor.numel();
  const Tensor input = input_tensor.reshape({input_tensor.numel()});
  Tensor output = output_tensor.reshape({n});
  if (!lv.even() || !lv.across_others()) return through_local_rank_0(run, output, input, op);
  const int64_t hosts = lv.host_count();
  const int64_t local = lv.within->size();
  const int64_t ranks = hosts * local;
  const auto parts = pieces(n, piece_elements(input.dtype(), ranks, 1));
  Tensor arranged = run.scratch.get(Scratch::kWhole, ranks * n, input.dtype());  // piece k at first * ranks
  Tensor host_sums = run.scratch.get(Scratch::kPart, hosts * n, input.dtype());  // piece k at first * hosts
  ReduceScatterOptions rs;
  rs.op = op;
  Parts within, across;
  for (const auto& [first, count] : parts) {
    lv.by_local_rank([&](int i, int rank) {
      arranged.flat_slice(first * ranks + i * count, count).copy_from(input.flat_slice(rank * n + first, count));
    });
    Tensor out = host_sums.flat_slice(first * hosts, count * hosts);
    within.add(lv.within->reduce_scatter_tensor(out, arranged.flat_slice(first * ranks, count * ranks), run.timed(rs)));
  }
  for (size_t k = 0; k < parts.size(); ++k) {
    const auto [first, count] = parts[k];
    within[k]->wait();
    Tensor out = output.flat_slice(first, count);
    across.add(lv.across->reduce_scatter_tensor(out, host_sums.flat_slice(first * hosts, count * hosts), run.timed(rs)));
  }
  across.wait_all();
}

}  // namespace hier
}  // namespace distcomm
