#include "tools/versions/build_versions.h"

#include "api/version.h"

namespace distcomm {

std::vector<std::pair<std::string, std::string>> build_versions() {
#if defined(__clang__)
  const std::string compiler = "clang " __clang_version__;
#elif defined(__GNUC__)
  const std::string compiler = "gcc " __VERSION__;
#else
  const std::string compiler = "unknown";
#endif
  return {
      {"distcomm", DISTCOMM_VERSION},
      {"compiler", compiler},
#include "tools/versions/library_versions.inc"
  };
}

std::string build_versions_line() {
  std::string line;
  for (const auto& [name, version] : build_versions()) {
    line += (line.empty() ? "" : ", ") + name + " " + version;
  }
  return line;
}

}  // namespace distcomm
