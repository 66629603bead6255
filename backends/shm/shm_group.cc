#include "backends/shm/shm_group.h"

#include <algorithm>

namespace distcomm {
namespace shm {

MappedGroup::MappedGroup(int rank, Layout layout, std::vector<Segment> segments, std::vector<int> pids,
                         std::vector<ProcessWatch> watches, int cpus_of_ranks, CpuQuota quota,
                         PopulateCharge populated)
    : rank_(rank),
      layout_(layout),
      populated_(std::move(populated)),
      segments_(std::move(segments)),
      pids_(std::move(pids)),
      watches_(std::move(watches)),
      cpus_of_ranks_(cpus_of_ranks),
      cpu_quota_(std::move(quota)) {
  for (const Segment& s : segments_) views_.emplace_back(s.base(), &layout_);
}

bool MappedGroup::alive(int r) const {
  if (r == rank_) return true;
  const ProcessWatch& w = watches_[static_cast<size_t>(r)];
  return w.watching() ? !w.ended() : segments_[static_cast<size_t>(r)].owner_alive();
}

std::vector<int> MappedGroup::ended_peers(const std::function<bool(int)>& consider) const {
  std::vector<int> ended;
  std::vector<const ProcessWatch*> watched;
  std::vector<int> rank_of_watch;
  for (int r = 0; r < size(); ++r) {
    if (r == rank_ || !consider(r)) continue;
    const ProcessWatch& w = watches_[static_cast<size_t>(r)];
    if (w.watching()) {
      watched.push_back(&w);
      rank_of_watch.push_back(r);
    } else if (!segments_[static_cast<size_t>(r)].owner_alive()) {
      ended.push_back(r);
    }
  }
  for (size_t i : ended_among(watched)) ended.push_back(rank_of_watch[i]);
  std::sort(ended.begin(), ended.end());
  return ended;
}

std::vector<int> MappedGroup::others_dead(int peer) const {
  return ended_peers([&](int r) { return r != peer && of(r).state().load(std::memory_order_acquire) == kActive; });
}

std::string MappedGroup::dead_too_text(const std::vector<int>& dead) const {
  if (dead.empty()) return "";
  if (dead.size() == 1) {
    return "; rank " + std::to_string(dead[0]) + " (pid " + std::to_string(pid(dead[0])) + ") has died too";
  }
  std::string ranks, pids;
  for (int r : dead) {
    ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    pids += (pids.empty() ? "" : ", ") + std::to_string(pid(r));
  }
  return "; ranks [" + ranks + "] (pids " + pids + ") have died too";
}

}  // namespace shm
}  // namespace distcomm
