// Points the plugin loader at the test-only plugins of tests/api/plugins (Bazel runfiles).
#pragma once

#include <cstdlib>
#include <string>

#include "tests/testing/test_files.h"

namespace distcomm {

inline std::string test_plugin_dir() { return testing::runfile("tests/api/plugins"); }

inline void use_test_plugins() { ::setenv("DISTCOMM_PLUGIN_PATH", test_plugin_dir().c_str(), 1); }

}  // namespace distcomm
