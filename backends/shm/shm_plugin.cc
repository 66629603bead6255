// The plugin entry point of libdistcomm_shm.so.
#include <sys/mman.h>
#include <unistd.h>

#include "api/plugin/plugin.h"
#include "backends/shm/shm_backend.h"
#include "backends/shm/shm_config.h"

namespace {

// Peers map each other's memfds through /proc/<pid>/fd; without either there is no backend.
int shm_available(std::string* why) {
  if (::access("/proc/self/fd", R_OK) != 0) {
    *why = "/proc/self/fd is not readable (peers map each other's segments through /proc)";
    return 0;
  }
  const int fd = ::memfd_create("distcomm-shm-probe", MFD_CLOEXEC);
  if (fd < 0) {
    *why = "memfd_create is not available (Linux 3.17 or later is needed)";
    return 0;
  }
  ::close(fd);
  return 1;
}

distcomm::Backend* shm_create(const distcomm::BackendOptions& options) {
  return new distcomm::shm::ShmBackend(options);
}

}  // namespace

DISTCOMM_DEFINE_PLUGIN_WITH_CONFIG("shm", "shm " DISTCOMM_VERSION " (shared memory, one host)", DISTCOMM_DEVICE_CPU, 0, shm_available,
                                   shm_create, distcomm::shm::kConfigKeys)
