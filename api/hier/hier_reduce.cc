// reduce by hosts. Hosts of one size L: a reduce_scatter within every host leaves local
// rank l 1/L of its host's sum; an all_reduce of it across (local rank l of every host, the
// L groups at once); an all_gather within the root's host gives the root the shares. Across
// hosts an all_reduce, not a reduce: gloo's reduce moves its bytes at about 0.6x its
// all_reduce's rate (2 simulated hosts at 1 Gbit/s, 64 MiB: 0.07 against 0.11 GB/s),
// while between 2 hosts each direction of a link carries the same share either way (more
// hosts: up to twice a reduce's bytes, still at the faster rate). Hosts of different
// sizes: a reduce within to local rank 0, an all_reduce among the hosts' local ranks 0,
// and the root's host's hands the result to the root. Other ranks' tensors stay as they
// were.
#include "api/hier/hier_schedule.h"

namespace distcomm {
namespace hier {
namespace {

void through_local_rank_0(OpRun& run, Tensor& flat, ReduceOp op, int root) {
  const Levels& lv = run.levels;
  const int root_host = lv.host_of(root);
  const int root_local = lv.local_of(root);
  // Local rank 0 reduces into its own tensor only where it is the root.
  Tensor sum = flat;
  if (lv.local == 0 && lv.rank != root) {
    sum = run.scratch.get(Scratch::kWhole, flat.numel(), flat.dtype());
    sum.copy_from(flat);
  }
  sum_at_local_rank_0(run, sum, op);
  if (lv.host != root_host || root_local == 0) return;
  if (lv.local == 0) lv.within->send(sum, root_local, run.timed(P2POptions{}))->wait();
  if (lv.rank == root) lv.within->recv(flat, 0, run.timed(P2POptions{}))->wait();
}

}  // namespace

void reduce(OpRun& run, Tensor& tensor, ReduceOp op, int root) {
  const Levels& lv = run.levels;
  const int64_t n = tensor.numel();
  Tensor flat = tensor.reshape({n});
  if (!lv.even() || !lv.across_others()) return through_local_rank_0(run, flat, op, root);
  const int root_host = lv.host_of(root);
  const int64_t local = lv.within->size();
  const Shares shares(run, flat, local, /*copy_in=*/true);
  Tensor share = run.scratch.get(Scratch::kPart, shares.block(), flat.dtype());
  auto share_piece = [&](size_t k) { return share.flat_slice(shares.first(k), shares.share_count(k)); };
  ReduceScatterOptions rs;
  rs.op = op;
  AllReduceOptions all;
  all.op = op;
  Parts scattered, reduced, gathered;
  for (size_t k = 0; k < shares.pieces(); ++k) {
    Tensor out = share_piece(k);
    scattered.add(lv.within->reduce_scatter_tensor(out, shares.piece(k), run.timed(rs)));
  }
  for (size_t k = 0; k < shares.pieces(); ++k) {
    scattered[k]->wait();
    Tensor piece = share_piece(k);
    reduced.add(lv.across->all_reduce(piece, run.timed(all)));
  }
  if (lv.host != root_host) return reduced.wait_all();
  // The root's host all_gathers the shares (the other ranks into scratch): shm's gather to
  // one rank ends each piece tens of ms late when its other ranks have nothing left to do
  // (measured: a 16 MiB reduce took 0.51 s against 0.09 s for an all_reduce, links unlimited).
  Tensor spare;
  if (lv.rank != root) spare = run.scratch.get(Scratch::kSpare, shares.block() * local, flat.dtype());
  for (size_t k = 0; k < shares.pieces(); ++k) {
    reduced[k]->wait();
    // The root's piece is written after its reduce_scatter has read it.
    Tensor out = lv.rank == root ? shares.piece(k)
                                 : spare.flat_slice(shares.first(k) * local, shares.share_count(k) * local);
    gathered.add(lv.within->all_gather_into_tensor(out, share_piece(k), run.timed(AllGatherOptions{})));
  }
  gathered.wait_all();
  if (lv.rank == root) shares.copy_out();
}

}  // namespace hier
}  // namespace distcomm
