// all_gather by hosts. Hosts of one size L, H hosts: local rank l all_gathers its input
// across, with local rank l of every host (the L groups at once), which gives it the blocks
// of local rank l of every host; an all_gather within the host gives every rank all of
// them, in (local rank, host) order, copied to their ranks' places (hosts need not hold
// consecutive ranks). What leaves a host is its ranks' blocks once per other host over L
// connections, where a flat ring through every rank sends each link (N - 1) blocks. Hosts
// of different sizes: a gather within to local rank 0, an all_gather among the hosts'
// local ranks 0 (each host's blocks padded to the largest host's count), a broadcast within.
#include "api/hier/hier_schedule.h"

namespace distcomm {
namespace hier {
namespace {

// The slices of `t`, `count` elements each, the first `n` of them.
std::vector<Tensor> blocks_of(const Tensor& t, int n, int64_t count) {
  std::vector<Tensor> out;
  for (int i = 0; i < n; ++i) out.push_back(t.flat_slice(i * count, count));
  return out;
}

void through_local_rank_0(OpRun& run, Tensor& output, const Tensor& input) {
  const Levels& lv = run.levels;
  const int64_t n = input.numel();
  const int hosts = lv.host_count();
  const int most = lv.largest_host();
  const int mine = lv.local_count(lv.host);
  if (lv.local == 0) {
    Tensor host_blocks = run.scratch.get(Scratch::kPart, most * n, input.dtype());
    if (most > mine) host_blocks.flat_slice(mine * n, (most - mine) * n).fill(0);  // padding, sent and dropped
    std::vector<Tensor> into = blocks_of(host_blocks, mine, n);
    lv.within->gather(into, input, run.timed(GatherOptions{}))->wait();
    Tensor every = run.scratch.get(Scratch::kWhole, hosts * most * n, input.dtype());
    lv.across->all_gather_into_tensor(every, host_blocks, run.timed(AllGatherOptions{}))->wait();
    for (int h = 0; h < hosts; ++h) {
      for (int l = 0; l < lv.local_count(h); ++l) {
        output.flat_slice(lv.rank_at(h, l) * n, n).copy_from(every.flat_slice((h * most + l) * n, n));
      }
    }
  } else {
    std::vector<Tensor> none;
    lv.within->gather(none, input, run.timed(GatherOptions{}))->wait();
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
