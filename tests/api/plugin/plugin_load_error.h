// What the loader says when it cannot load a backend: its BackendUnavailable's message, or
// "" when the plugin loaded (for the loader's tests).
#pragma once

#include <string>

#include "api/errors.h"
#include "api/plugin/plugin_registry.h"

namespace distcomm {

// Searching `search` only.
inline std::string load_error_in(const std::string& name, const PluginSearch& search) {
  try {
    load_plugin(name, search);
  } catch (const BackendUnavailable& e) {
    return e.what();
  }
  return "";
}

// Searching where the environment says (DISTCOMM_PLUGIN_PATH, ...), as load_plugin(name) does.
inline std::string load_error(const std::string& name) {
  return load_error_in(name, PluginSearch::from_environment());
}

}  // namespace distcomm
