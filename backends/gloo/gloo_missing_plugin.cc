// Built instead of the real plugin where libgloo is not installed: it loads, and says why
// the backend cannot run (GLOO_MISSING_REASON, from @system_gloo//:info.bzl).
#include "api/plugin.h"
#include "backends/gloo/gloo_config.h"

namespace {

int gloo_available(std::string* why) {
  if (why) *why = GLOO_MISSING_REASON;
  return 0;
}

distcomm::Backend* gloo_create(const distcomm::BackendOptions&) { return nullptr; }

}  // namespace

DISTCOMM_DEFINE_PLUGIN_WITH_CONFIG("gloo", "gloo (not built: library missing)", DISTCOMM_DEVICE_CPU, 0,
                                   gloo_available, gloo_create, distcomm::gloo::kConfigKeys)
