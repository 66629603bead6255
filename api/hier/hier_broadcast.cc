// broadcast by hosts. Hosts of one size L: on the root's host a broadcast within gives
// every local rank the tensor; local rank l sends share l (1/L of it) across, to local
// rank l of every other host (the L groups across at once); each other host's all_gather
// within puts the shares together. What crosses to a host is the tensor once, over L
// connections, and the shm steps of one piece overlap the network's of another. Hosts of
// different sizes: the root's host broadcasts within, its local rank 0 across to the other
// hosts' local ranks 0, which broadcast within.
#include "api/hier/hier_schedule.h"

namespace distcomm {
namespace hier {
namespace {

BroadcastOptions from(int root) {
  BroadcastOptions o;
  o.root = root;
  return o;
}

void through_local_rank_0(OpRun& run, Tensor& flat, int root) {
  const Levels& lv = run.levels;
  const int root_host = lv.host_of(root);
  const int root_local = lv.local_of(root);
  const auto parts = pieces(flat.numel(), piece_elements(flat.dtype(), 1, 1));
  auto piece = [&](size_t k) { return flat.flat_slice(parts[k].first, parts[k].second); };
  const bool leader = lv.local == 0 && lv.across_others();
  Parts within, across;
  if (lv.host == root_host) {
    for (size_t k = 0; k < parts.size(); ++k) {
      Tensor p = piece(k);
      within.add(lv.within->broadcast(p, run.timed(from(root_local))));
    }
    if (!leader) return within.wait_all();
    for (size_t k = 0; k < parts.size(); ++k) {
      within[k]->wait();
      Tensor p = piece(k);
      across.add(lv.across->broadcast(p, run.timed(from(root_host))));
    }
    return across.wait_all();
  }
  if (lv.local == 0) {
    for (size_t k = 0; k < parts.size(); ++k) {
      Tensor p = piece(k);
      across.add(lv.across->broadcast(p, run.timed(from(root_host))));
    }
  }
  for (size_t k = 0; k < parts.size(); ++k) {
    if (lv.local == 0) across[k]->wait();
    Tensor p = piece(k);
    within.add(lv.within->broadcast(p, run.timed(from(0))));
  }
  within.wait_all();
}

}  // namespace

void broadcast(OpRun& run, Tensor& tensor, int root) {
  const Levels& lv = run.levels;
  const int64_t n = tensor.numel();
  Tensor flat = tensor.reshape({n});
  if (!lv.even()) return through_local_rank_0(run, flat, root);
  const int root_host = lv.host_of(root);
  const int root_local = lv.local_of(root);
  const Shares shares(run, flat, lv.within->size(), /*copy_in=*/lv.rank == root);
  Parts within, across;
  if (lv.host == root_host) {
    for (size_t k = 0; k < shares.pieces(); ++k) {
      Tensor p = shares.piece(k);
      within.add(lv.within->broadcast(p, run.timed(from(root_local))));
    }
    for (size_t k = 0; k < shares.pieces() && lv.across_others(); ++k) {
      within[k]->wait();
      Tensor share = shares.share_of(k, lv.local);
      across.add(lv.across->broadcast(share, run.timed(from(root_host))));
    }
    within.wait_all();
    across.wait_all();
  } else {
    for (size_t k = 0; k < shares.pieces(); ++k) {
      Tensor share = shares.share_of(k, lv.local);
      across.add(lv.across->broadcast(share, run.timed(from(root_host))));
    }
    for (size_t k = 0; k < shares.pieces(); ++k) {
      across[k]->wait();
      Tensor p = shares.piece(k);
      // In place: this rank's share is already its block of the piece.
      within.add(lv.within->all_gather_into_tensor(p, shares.share_of(k, lv.local), run.timed(AllGatherOptions{})));
    }
    within.wait_all();
  }
  if (lv.rank != root) shares.copy_out();
}

}  // namespace hier
}  // namespace distcomm
