// How much of its groups' shared memory a process maps in at creation, over all its groups.
//
// Creation maps in a group's collective areas (this rank's own and, for a small group, its
// peers'), so that the group's first ops take no page faults (shm_segment.cc says why they
// cost ~20 us a page on a VM). That time and that memory are paid per group: 300 groups of 3
// ranks took 22.7 s to create and held 3.9 GB resident (helper-69), although most of them
// only ever carried small messages. So a process maps in eagerly only while its live groups
// stay within kEagerBytes; a group beyond it is mapped lazily: its first op of each size takes
// the faults, and only the pages its ops touch ever become resident.
#pragma once

#include <sys/types.h>

#include <cstddef>

namespace distcomm {
namespace shm {

class PopulateCharge {
 public:
  // 256 MiB: the world and a few subgroups or mesh dimensions of a host's ranks (a group of
  // 8 ranks maps in 8 x 4 MiB with the default slots), not a group per pair of ranks.
  static constexpr size_t kEagerBytes = size_t{256} << 20;

  // Takes `bytes` from this process's budget when all of them fit (granted()), else nothing.
  // A child forked after its parent's groups were made starts with the whole budget.
  static PopulateCharge take(size_t bytes);

  PopulateCharge() = default;
  ~PopulateCharge();  // gives the bytes back: the group's memory is unmapped with it
  PopulateCharge(PopulateCharge&& other) noexcept;
  PopulateCharge& operator=(PopulateCharge&& other) noexcept;
  PopulateCharge(const PopulateCharge&) = delete;
  PopulateCharge& operator=(const PopulateCharge&) = delete;

  bool granted() const { return bytes_ > 0; }

 private:
  void give_back();
  size_t bytes_ = 0;
  pid_t owner_ = 0;  // the process it was taken in (a forked child's budget is its own)
};

}  // namespace shm
}  // namespace distcomm
