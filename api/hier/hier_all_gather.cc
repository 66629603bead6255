// all_gather by hosts. Hosts of one size L, H hosts: local rank l all_gathers its input
// across, with local rank l of every host (the L groups at once), which gives it the blocks
// of local rank l of every host; an all_gather within the host gives every rank all of
// them, in (local rank, host) order, copied to their ranks' places (hosts need not hold
// consecutive ranks). What leaves a host is its ranks' blocks once per other host over L
// connections, where a flat ring through every rank sends each link (N - 1) blocks. Hosts
// of different sizes: an all_gather within, one among the hosts' local ranks 0 (each host's
// blocks padded to the largest host's count), a broadcast within.
#include "api/hier/hier_schedule.h"

namespace distcomm {
namespace hier {
namespace {

void through_local_rank_0(OpRun& run, Tensor& output, const Tensor& input) {
  const Levels& lv = run.levels;
  const int64_t n = input.numel();
  const int hosts = lv.host_count();
  const int most = lv.largest_host();
  const int mine = lv.local_count(lv.host);
  // The host's blocks, on every rank (an all_gather within, not a gather to local rank 0:
  // shm's gather and scatter move about 0.1 GB/s, its all_gather and broadcast several GB/s).
  Tensor host_blocks = run.scratch.get(Scratch::kPart, most * n, input.dtype());
  Tensor mine_out = host_blocks.flat_slice(0, mine * n);
  lv.within->all_gather_into_tensor(mine_out, input, run.timed(AllGatherOptions{}))->wait();
  if (lv.local == 0) {
    if (most > mine) host_blocks.flat_slice(mine * n, (most - mine) * n).fill(0);  // padding, sent and dropped
    Tensor every = run.scratch.get(Scratch::kWhole, hosts * most * n, input.dtype());
    lv.across->all_gather_into_tensor(every, host_blocks, run.timed(AllGatherOptions{}))->wait();
    for (int h = 0; h < hosts; ++h) {
      for (int l = 0; l < lv.local_count(h); ++l) {
        output.flat_slice(lv.rank_at(h, l) * n, n).copy_from(every.flat_slice((h * most + l) * n, n));
      }
    }
  }
  lv.within->broadcast(output, run.timed(BroadcastOptions{}))->wait();
}

}  // namespace

void all_gather(OpRun& run, Tensor& output_tensor, const Tensor& input_tensor) {
  const Levels& lv = run.levels;
  const int64_t n = input_tensor.numel();
  const Tensor input = input_tensor.reshape({n});
  Tensor output = output_tensor.reshape({output_tensor.numel()});
  if (!lv.even() || !lv.across_others()) return through_local_rank_0(run, output, input);
  const int64_t hosts = lv.host_count();
  const int64_t local = lv.within->size();
  const int64_t ranks = hosts * local;
  // Pieces of the input; piece k of every rank's block travels together.
  const auto parts = pieces(n, piece_elements(input.dtype(), ranks, 1));
  Tensor from_hosts = run.scratch.get(Scratch::kPart, hosts * n, input.dtype());  // piece k at first * hosts
  Tensor from_all = run.scratch.get(Scratch::kWhole, ranks * n, input.dtype());   // piece k at first * ranks
  Parts across, within;
  for (const auto& [first, count] : parts) {
    Tensor out = from_hosts.flat_slice(first * hosts, count * hosts);
    across.add(lv.across->all_gather_into_tensor(out, input.flat_slice(first, count), run.timed(AllGatherOptions{})));
  }
  for (size_t k = 0; k < parts.size(); ++k) {
    const auto [first, count] = parts[k];
    across[k]->wait();
    Tensor out = from_all.flat_slice(first * ranks, count * ranks);
    within.add(lv.within->all_gather_into_tensor(out, from_hosts.flat_slice(first * hosts, count * hosts),
                                                 run.timed(AllGatherOptions{})));
  }
  for (size_t k = 0; k < parts.size(); ++k) {
    const auto [first, count] = parts[k];
    within[k]->wait();
    lv.by_local_rank([&](int i, int rank) {
      output.flat_slice(rank * n + first, count).copy_from(from_all.flat_slice(first * ranks + i * count, count));
    });
  }
}

}  // namespace hier
}  // namespace distcomm
