// The plugin entry point of libdistcomm_gloo.so.
#include <gloo/config.h>

#include "api/plugin/plugin.h"
#include "backends/gloo/gloo_backend.h"
#include "backends/gloo/gloo_config.h"

namespace {

#define GLOO_VERSION_TEXT \
  "gloo " DISTCOMM_STR(GLOO_VERSION_MAJOR) "." DISTCOMM_STR(GLOO_VERSION_MINOR) "." DISTCOMM_STR(GLOO_VERSION_PATCH) " (tcp), distcomm " DISTCOMM_VERSION

// gloo's TCP transport needs nothing the loader has not already checked: libgloo.so is
// linked in, and sockets exist everywhere.
int gloo_available(std::string*) { return 1; }

distcomm::Backend* gloo_create(const distcomm::BackendOptions& options) {
  return new distcomm::gloo::GlooBackend(options);
}

}  // namespace

DISTCOMM_DEFINE_PLUGIN_WITH_CONFIG("gloo", GLOO_VERSION_TEXT, DISTCOMM_DEVICE_CPU, 0, gloo_available, gloo_create,
                                   distcomm::gloo::kConfigKeys)
