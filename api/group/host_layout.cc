#include "api/group/host_layout.h"

#include <map>
#include <set>

#include "api/group/auto_backend.h"

namespace distcomm {

HostLayout HostLayout::from_placements(const std::vector<std::string>& placements) {
  HostLayout layout;
  std::map<std::string, int> index_of;
  std::set<std::string> machines;
  for (size_t r = 0; r < placements.size(); ++r) {
    const auto found = index_of.emplace(placements[r], static_cast<int>(layout.hosts.size()));
    if (found.second) layout.hosts.emplace_back();
    const int host = found.first->second;
    std::vector<int>& members = layout.hosts[static_cast<size_t>(host)];
    layout.host_of.push_back(host);
    layout.local_rank_of.push_back(static_cast<int>(members.size()));
    members.push_back(static_cast<int>(r));
    machines.insert(machine_of_placement(placements[r]));
  }
  layout.machines = static_cast<int>(machines.size());
  return layout;
}

bool HostLayout::even() const {
  for (const auto& host : hosts) {
    if (host.size() != hosts.front().size()) return false;
  }
  return true;
}

std::vector<std::vector<int>> HostLayout::across_hosts() const {
  std::vector<std::vector<int>> groups;
  for (const auto& host : hosts) {
    for (size_t l = 0; l < host.size(); ++l) {
      if (groups.size() <= l) groups.emplace_back();
      groups[l].push_back(host[l]);
    }
  }
  return groups;
}

std::string HostLayout::describe() const {
  const std::string n = std::to_string(hosts.size()) + (hosts.size() == 1 ? " host" : " hosts");
  const std::string users = machines > 0 && static_cast<size_t>(machines) < hosts.size()
                                ? " (users of " + std::to_string(machines) + (machines == 1 ? " machine)" : " machines)")
                                : "";
  if (even()) return n + " x " + std::to_string(hosts.empty() ? 0 : hosts.front().size()) + " ranks" + users;
  std::string counts;
  for (const auto& host : hosts) counts += (counts.empty() ? "" : " + ") + std::to_string(host.size());
  return n + " (" + counts + " ranks)" + users;
}

}  // namespace distcomm
