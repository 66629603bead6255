// Where a group's ranks sit, host by host: what a hierarchical group (hierarchical_backend.h)
// builds its groups from. Hosts are told apart by the placements the ranks exchange at
// creation (auto_backend_placement: one shared-memory domain, effective uid and
// DISTCOMM_HOST_ID, one host), numbered in the order of their lowest rank; a rank's local
// rank is its index among its host's ranks, in rank order.
#pragma once

#include <string>
#include <vector>

namespace distcomm {

struct HostLayout {
  std::vector<std::vector<int>> hosts;  // each host's ranks, ascending
  std::vector<int> host_of;             // rank -> index into hosts
  std::vector<int> local_rank_of;       // rank -> index among its host's ranks
  int machines = 0;                     // hosts that differ by more than their user

  static HostLayout from_placements(const std::vector<std::string>& placements);

  // Every host holds the same number of ranks.
  bool even() const;
  // The ranks of local rank l on every host that has one, in host order: the groups across
  // hosts (one per local rank).
  std::vector<std::vector<int>> across_hosts() const;
  // "2 hosts x 2 ranks", "2 hosts (3 + 1 ranks)"; where users of one machine make up
  // some of the hosts, "2 hosts x 2 ranks (users of 1 machine)".
  std::string describe() const;
};

}  // namespace distcomm
