// The loaded shm plugin's count of the entries its point-to-point matching and checking
// examined (distcomm_shm_p2p_scan_steps, shm_p2p.cc), for tests in the process that loaded
// it. The plugin is loaded by the group, not linked: it is found by its path in this
// process's mappings and opened again only to look the symbol up (RTLD_NOLOAD).
// Null when no shm plugin is loaded yet (call it after the group exists).
#pragma once

#include <dlfcn.h>

#include <cstdint>
#include <fstream>
#include <string>

namespace distcomm {
namespace testing {

using ShmScanStepsFn = uint64_t (*)();

inline ShmScanStepsFn shm_scan_steps_fn() {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    const size_t at = line.find('/');
    if (at == std::string::npos || line.find("libdistcomm_shm.so") == std::string::npos) continue;
    void* handle = dlopen(line.substr(at).c_str(), RTLD_NOW | RTLD_NOLOAD);
    if (handle == nullptr) continue;
    return reinterpret_cast<ShmScanStepsFn>(dlsym(handle, "distcomm_shm_p2p_scan_steps"));
  }
  return nullptr;
}

}  // namespace testing
}  // namespace distcomm
