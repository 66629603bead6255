// The plugin entry point of libdistcomm_shm.so.
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "api/plugin/plugin.h"
#include "backends/shm/shm_backend.h"
#include "backends/shm/shm_config.h"
#include "backends/shm/shm_layout.h"
#include "backends/shm/shm_segment.h"

namespace {

// Peers map each other's memfds through /proc/<pid>/fd; without either there is no backend.
int shm_available(std::string* why) {
  if (::access("/proc/self/fd", R_OK) != 0) {
    *why = "/proc/self/fd is not readable (peers map each other's segments through /proc)";
    return 0;
  }
  const int fd = ::memfd_create("distcomm-shm-probe", MFD_CLOEXEC);
  if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
    const int err = errno;
    *why = std::string("memfd_create: ") + std::strerror(err) + distcomm::shm::descriptor_failure_hint(err, 0);
    return 0;
  }
  if (fd < 0) {
    *why = "memfd_create is not available (Linux 3.17 or later is needed)";
    return 0;
  }
  ::close(fd);
  // Under a file size limit (ulimit -f) smaller than a group of two ranks' segment with the
  // default settings, shm cannot run its usual groups: "auto" then picks gloo, as for the
  // refusals above (a group that still asks for shm is refused by Segment::create, never
  // killed by SIGXFSZ).
  const std::string over = distcomm::shm::file_size_limit_failure(
      distcomm::shm::Layout(2, distcomm::shm::ShmConfig{}).total_bytes());
  if (!over.empty()) {
    std::string text = over.substr(over.find(' ') + 1);  // without "shm: "
    const std::string mine = "this rank's segment";
    *why = text.replace(text.find(mine), mine.size(), "a rank's segment (2 ranks, default shm_slot_bytes and shm_slots)");
    return 0;
  }
  return 1;
}

distcomm::Backend* shm_create(const distcomm::BackendOptions& options) {
  return new distcomm::shm::ShmBackend(options);
}

}  // namespace

DISTCOMM_DEFINE_PLUGIN_WITH_CONFIG("shm", "shm " DISTCOMM_VERSION " (shared memory, one host)", DISTCOMM_DEVICE_CPU, 0, shm_available,
                                   shm_create, distcomm::shm::kConfigKeys)
