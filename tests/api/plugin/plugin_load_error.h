// What the loader says when it cannot load a backend: its BackendUnavailable's message, or
// "" when the plugin loaded (for the loader's tests).
#pragma once

#include <string>

#include "api/errors.h"
#include "api/plugin/plugin_registry.h"

namespace distcomm {

inline std::string load_error(const std::string& name) {
  try {
    load_plugin(name);
  } catch (const BackendUnavailable& e) {
    return e.what();
  }
  return "";
}

}  // namespace distcomm
