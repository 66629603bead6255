// Linked into every gloo test binary: where the gloo plugin cannot run on this machine
// (built without libgloo), every test is skipped with the plugin's reason instead of
// failing. A plugin that is missing altogether is a build problem and fails loudly.
#include <gtest/gtest.h>

#include "api/plugin/plugin_registry.h"
#include "tests/testing/require.h"

namespace distcomm {
namespace {

class RequireGloo : public ::testing::Environment {
 public:
  void SetUp() override {
    const PluginInfo& info = load_plugin("gloo");
    if (!info.available) DISTCOMM_SKIP_WITHOUT("gloo") << "the gloo backend cannot run here: " << info.unavailable_reason;
  }
};

const auto* const kRequireGloo = ::testing::AddGlobalTestEnvironment(new RequireGloo);

}  // namespace
}  // namespace distcomm
