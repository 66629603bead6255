// Test-only plugins that the loader must refuse, each for one reason. The descriptor is
// written out by hand (not with DISTCOMM_DEFINE_PLUGIN) to fake another build.
#include "api/plugin/plugin.h"

namespace {
int available(std::string*) { return 1; }
distcomm::Backend* create(const distcomm::BackendOptions&) { return nullptr; }
}  // namespace

extern "C" __attribute__((visibility("default"))) const distcomm_plugin_v1* distcomm_backend_plugin_v1() {
  static const distcomm_plugin_v1 d = {sizeof(distcomm_plugin_v1),
                                       REFUSED_ABI_MAJOR,
                                       0,
                                       REFUSED_TOOLCHAIN,
                                       REFUSED_NAME,
                                       "refused test plugin",
                                       DISTCOMM_DEVICE_CPU,
                                       0,
                                       available,
                                       create,
                                       nullptr};
  return &d;
}
