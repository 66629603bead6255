// Where a test finds the build's files and keeps its own.
#pragma once

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace distcomm {
namespace testing {

// The absolute path of a file of this workspace in the test's runfiles
// ("tools/launch/launch").
inline std::string runfile(const std::string& workspace_path) {
  const char* dir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return std::string(dir ? dir : ".") + "/" + (workspace ? workspace : "distcomm") + "/" + workspace_path;
}

// A path in the test's private temporary folder.
inline std::string temp_path(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

// The whole file ("" when it cannot be read).
inline std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace testing
}  // namespace distcomm
