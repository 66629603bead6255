// reduce by hosts. Hosts of one size L: a reduce_scatter within every host leaves local
// rank l 1/L of its host's sum; a reduce across to the root's host, local rank l to local
// rank l (the L groups at once); a gather within the root's host gives the root the
// shares. Every host sends its sum once, over L connections. Hosts of different sizes: a
// reduce within to local rank 0, a reduce among the hosts' local ranks 0 to the root's
// host's, which hands the result to the root. Other ranks' tensors stay as they were.
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
  ReduceOptions to_leader;
  to_leader.op = op;
  lv.within->reduce(sum, run.timed(to_leader))->wait();
  if (lv.local == 0 && lv.across_others()) {
    ReduceOptions to_root_host = to_leader;
    to_root_host.root = root_host;
    lv.across->reduce(sum, run.timed(to_root_host))->wait();
  }
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
  const int root_local = lv.local_of(root);
  const int64_t local = lv.within->size();
  const Shares shares(run, flat, local, /*copy_in=*/true);
  Tensor share = run.scratch.get(Scratch::kPart, shares.block(), flat.dtype());
  auto share_piece = [&](size_t k) { return share.flat_slice(shares.first(k), shares.share_count(k)); };
  ReduceScatterOptions rs;
  rs.op = op;
  ReduceOptions to_root_host;
  to_root_host.op = op;
  to_root_host.root = root_host;
  GatherOptions to_root;
  to_root.root = root_local;
  Parts scattered, reduced, gathered;
  for (size_t k = 0; k < shares.pieces(); ++k) {
    Tensor out = share_piece(k);
    scattered.add(lv.within->reduce_scatter_tensor(out, shares.piece(k), run.timed(rs)));
  }
  for (size_t k = 0; k < shares.pieces(); ++k) {
    scattered[k]->wait();
    Tensor piece = share_piece(k);
    reduced.add(lv.across->reduce(piece, run.timed(to_root_host)));
  }
  if (lv.host != root_host) return reduced.wait_all();
  for (size_t k = 0; k < shares.pieces(); ++k) {
    reduced[k]->wait();
    // The root's piece is written after its reduce_scatter has read it.
    std::vector<Tensor> into;
    if (lv.rank == root) {
      for (int64_t l = 0; l < local; ++l) into.push_back(shares.share_of(k, l));
    }
    gathered.add(lv.within->gather(into, share_piece(k), run.timed(to_root)));
  }
  gathered.wait_all();
  if (lv.rank == root) shares.copy_out();
}

}  // namespace hier
}  // namespace distcomm
