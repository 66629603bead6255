// A test-only plugin whose available() says no without saying why (tests/api/plugin:
// plugin_loader_edges_test): the loader must not end its message with a bare colon.
#include <string>

#include "api/plugin/plugin.h"

namespace {
int available(std::string*) { return 0; }
distcomm::Backend* create(const distcomm::BackendOptions&) { return nullptr; }
}  // namespace

DISTCOMM_DEFINE_PLUGIN("no_reason", "unavailable test plugin, no reason given", DISTCOMM_DEVICE_CPU, 0, available,
                       create)
