// all_reduce by hosts. Hosts of one size L: a reduce_scatter within the host leaves each
// local rank 1/L of the host's sum; each local rank all_reduces its share with its local
// rank on the other hosts (the L groups across at once, so every local rank's core and
// connection works); an all_gather within the host puts the shares together. Across hosts
// every byte travels once per host, not once per rank. Hosts of different sizes: a reduce
// to local rank 0, an all_reduce among the hosts' local ranks 0, a broadcast within.
#include "api/hier/hier_schedule.h"

namespace distcomm {
namespace hier {
namespace {

void through_local_rank_0(OpRun& run, Tensor& flat, ReduceOp op) {
  sum_at_local_rank_0(run, flat, op);
  run.levels.within->broadcast(flat, run.timed(BroadcastOptions{}))->wait();
}

}  // namespace

void all_reduce(OpRun& run, Tensor& tensor, ReduceOp op) {
  const Levels& lv = run.levels;
  const int64_t n = tensor.numel();
  Tensor flat = tensor.reshape({n});
  if (!lv.even()) return through_local_rank_0(run, flat, op);
  const int64_t local = lv.within->size();
  AllReduceOptions across_opts;
  across_opts.op = op;
  if (local == 1) {
    if (lv.across_others()) lv.across->all_reduce(flat, run.timed(across_opts))->wait();
    return;
  }
  // Each local rank's share of the host's sum: shares of the tensor, in pieces.
  const Shares shares(run, flat, local, /*copy_in=*/true);
  Tensor share = run.scratch.get(Scratch::kPart, shares.block(), flat.dtype());
  auto share_piece = [&](size_t k) { return share.flat_slice(shares.first(k), shares.share_count(k)); };
  // All the pieces' reduce_scatters are issued at once, each piece's all_reduce across hosts
  // as its reduce_scatter ends, each all_gather as its all_reduce ends: the host's memory
  // work and the network's overlap.
  Parts scattered, reduced, gathered;
  ReduceScatterOptions rs;
  rs.op = op;
  for (size_t k = 0; k < shares.pieces(); ++k) {
    Tensor out = share_piece(k);
    scattered.add(lv.within->reduce_scatter_tensor(out, shares.piece(k), run.timed(rs)));
  }
  for (size_t k = 0; k < shares.pieces(); ++k) {
    scattered[k]->wait();
    if (!lv.across_others()) continue;
    Tensor piece = share_piece(k);
    reduced.add(lv.across->all_reduce(piece, run.timed(across_opts)));
  }
  for (size_t k = 0; k < shares.pieces(); ++k) {
    if (lv.across_others()) reduced[k]->wait();
    Tensor out = shares.piece(k);
    gathered.add(lv.within->all_gather_into_tensor(out, share_piece(k), run.timed(AllGatherOptions{})));
  }
  gathered.wait_all();
  shares.copy_out();
}

}  // namespace hier
}  // namespace distcomm
