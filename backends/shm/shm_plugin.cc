// The plugin entry point of libdistcomm_shm.so.
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <map>
#include <string>
#include <type_traits>

#include "api/errors.h"
#include "api/group/shm_segment_fits.h"
#include "api/plugin/plugin.h"
#include "backends/shm/shm_backend.h"
#include "backends/shm/shm_config.h"
#include "backends/shm/shm_layout.h"
#include "backends/shm/shm_segment.h"
#include "backends/shm/shm_segment_refusal.h"

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
    *why = distcomm::shm::segment_refusal(over, "a rank's segment (2 ranks, default shm_slot_bytes and shm_slots)");
    return 0;
  }
  return 1;
}

// distcomm_shm_segment_fits's answer where it could not judge (`failed`: what went wrong).
void say_not_judged(int group_size, const char* failed, std::string* why) noexcept {
  try {
    if (why) {
      *why = "could not judge whether a rank's segment (" + std::to_string(group_size) +
             " ranks) fits this process's file size limit (ulimit -f): " + failed + "; judged as not fitting";
    }
  } catch (...) {  // out of memory: the answer (0) stands without its reason
  }
}

distcomm::Backend* shm_create(const distcomm::BackendOptions& options) {
  return new distcomm::shm::ShmBackend(options);
}

}  // namespace

// For "auto" (api/group/auto_backend.cc, which looks it up with dlsym in the loaded plugin;
// a plugin without it is judged by shm_available alone): whether this rank's segment for a
// group of `group_size` ranks with the shm settings of `config` (BackendOptions::config) fits
// this process's file size limit. The probe above sizes a two-rank group, but a segment grows
// with the group: under a limit between the two, auto picked shm and the group's creation
// failed, where it should run gloo. 0 with *why (Segment::create's refusal, without "shm: ")
// when it does not fit; 1 otherwise, settings that do not parse included (the backend's
// creation refuses those, naming the key). Any other failure to judge answers 0 with what
// failed: a "fits" there would bring back the death at creation this check exists to prevent,
// where gloo runs. Never throws. Its type is declared once, with the core's side
// (api/group/shm_segment_fits.h): checked below.
extern "C" __attribute__((visibility("default"))) int distcomm_shm_segment_fits(
    int group_size, const std::map<std::string, std::string>* config, std::string* why) {
  try {
    const std::string whose = "a rank's segment (" + std::to_string(group_size) + " ranks, this group's shm settings)";
    distcomm::shm::ShmConfig settings;
    try {
      if (config) settings = distcomm::shm::parse_shm_config(*config);
    } catch (const distcomm::InvalidArgument&) {
      return 1;  // the group's creation refuses the setting, naming it
    }
    const std::string over =
        distcomm::shm::file_size_limit_failure(distcomm::shm::Layout(group_size, settings).total_bytes());
    if (over.empty()) return 1;
    if (why) *why = distcomm::shm::segment_refusal(over, whose);
    return 0;
  } catch (const std::exception& e) {
    say_not_judged(group_size, e.what(), why);
  } catch (...) {
    say_not_judged(group_size, "an unknown exception", why);
  }
  return 0;
}
static_assert(std::is_same<decltype(distcomm_shm_segment_fits), distcomm::ShmSegmentFits>::value,
              "distcomm_shm_segment_fits must have the type the core calls it through (api/group/shm_segment_fits.h)");

DISTCOMM_DEFINE_PLUGIN_WITH_CONFIG("shm", "shm " DISTCOMM_VERSION " (shared memory, one host)", DISTCOMM_DEVICE_CPU, 0, shm_available,
                                   shm_create, distcomm::shm::kConfigKeys)
