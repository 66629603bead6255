// Built instead of the real plugin where libgloo is not installed: it loads, and says why
// the backend cannot run (GLOO_MISSING_REASON, from @system_gloo//:info.bzl).
#include "api/plugin/plugin.h"
#include "backends/gloo/gloo_config.h"

DISTCOMM_DEFINE_UNAVAILABLE_PLUGIN("gloo", "gloo (not built: library missing)", DISTCOMM_DEVICE_CPU, 0,
                                   GLOO_MISSING_REASON, distcomm::gloo::kConfigKeys)
