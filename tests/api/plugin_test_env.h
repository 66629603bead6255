// Points the plugin loader at the test-only plugins of tests/api/plugins (Bazel runfiles).
#pragma once

#include <cstdlib>
#include <string>

namespace distcomm {

inline std::string test_plugin_dir() {
  const char* root = std::getenv("TEST_SRCDIR");
  return std::string(root ? root : ".") + "/distcomm/tests/api/plugins";
}

inline void use_test_plugins() { ::setenv("DISTCOMM_PLUGIN_PATH", test_plugin_dir().c_str(), 1); }

}  // namespace distcomm
