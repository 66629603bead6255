#include "api/group/auto_backend.h"

#include <unistd.h>

#include <fstream>
#include <set>

#include "api/errors.h"
#include "api/plugin/plugin_registry.h"

namespace distcomm {
namespace {

constexpr char kShmReady[] = " shm";

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

std::string shared_memory_domain() {
  std::string domain;
  std::getline(std::ifstream("/proc/sys/kernel/random/boot_id"), domain);
  char ns[64];
  const ssize_t n = ::readlink("/proc/self/ns/pid", ns, sizeof(ns) - 1);
  if (n > 0) domain += " " + std::string(ns, static_cast<size_t>(n));
  return domain;
}

// Whether the shm plugin loads (and, with `runs`, can run here).
bool shm_plugin(bool runs, const PluginSearch& plugins) {
  try {
    const PluginInfo& info = load_plugin("shm", plugins);
    return !runs || info.available;
  } catch (const BackendUnavailable&) {
    return false;
  }
}

std::string auto_backend_placement(const PluginSearch& plugins, const std::string& host_id) {
  return shared_memory_domain() + (host_id.empty() ? "" : " host " + host_id) +
         (shm_plugin(true, plugins) ? kShmReady : "");
}

std::vector<std::string> auto_backend_candidates(const PluginSearch& plugins) {
  if (shm_plugin(false, plugins)) return {"shm", "gloo"};
  return {"gloo"};
}

std::string why_not_hierarchical(const std::vector<std::string>& placements) {
  std::set<std::string> hosts;
  for (size_t r = 0; r < placements.size(); ++r) {
    if (!ends_with(placements[r], kShmReady)) return "rank " + std::to_string(r) + " cannot run shm";
    hosts.insert(placements[r]);
  }
  if (hosts.size() < 2) return "one host";
  if (hosts.size() == placements.size()) return "one rank per host";
  return "";
}

std::string choose_auto_cpu_backend(const std::vector<std::string>& placements) {
  bool one_place = true;
  for (const std::string& p : placements) one_place = one_place && p == placements.front();
  if (one_place && ends_with(placements.front(), kShmReady)) return "shm";
  return why_not_hierarchical(placements).empty() ? "hier" : "gloo";
}

}  // namespace distcomm
