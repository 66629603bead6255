#include "backends/shm/shm_cpus.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <sstream>

namespace distcomm {
namespace shm {

std::string allowed_cpus_text() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return "";
  std::string text;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    if (!text.empty()) text += ",";
    text += std::to_string(cpu);
  }
  return text;
}

int cpus_in_union(const std::vector<std::string>& masks) {
  std::set<int> cpus;
  for (const std::string& mask : masks) {
    if (mask.empty()) return 0;
    std::istringstream in(mask);
    for (std::string cpu; std::getline(in, cpu, ',');) cpus.insert(std::stoi(cpu));
  }
  return static_cast<int>(cpus.size());
}

int online_cpus() {
  const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return online_cpus();
  const int n = CPU_COUNT(&set);
  return n > 0 ? n : online_cpus();
}

bool oversubscribed(int group_size, int local_world_size, int cpus) {
  return std::max(group_size, local_world_size) > cpus;
}

int cpus_for_host_ranks(int own_cpus, int group_union, int online) {
  if (group_union > own_cpus) return std::max(online, group_union);
  return std::max(own_cpus, group_union);
}

}  // namespace shm
}  // namespace distcomm
