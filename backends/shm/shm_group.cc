#include "backends/shm/shm_group.h"

namespace distcomm {
namespace shm {

MappedGroup::MappedGroup(int rank, Layout layout, std::vector<Segment> segments, std::vector<int> pids,
                         std::vector<ProcessWatch> watches, int cpus_of_ranks)
    : rank_(rank),
      layout_(layout),
      segments_(std::move(segments)),
      pids_(std::move(pids)),
      watches_(std::move(watches)),
      cpus_of_ranks_(cpus_of_ranks) {
  for (const Segment& s : segments_) views_.emplace_back(s.base(), &layout_);
}

bool MappedGroup::alive(int r) const {
  if (r == rank_) return true;
  const ProcessWatch& w = watches_[static_cast<size_t>(r)];
  return w.watching() ? !w.ended() : segments_[static_cast<size_t>(r)].owner_alive();
}

}  // namespace shm
}  // namespace distcomm
