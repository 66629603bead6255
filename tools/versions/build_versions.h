// What this build was made with, for reports that must be comparable between runs.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace distcomm {

// {"distcomm", "0.1.0"}, {"compiler", "gcc 12.2.0"}, {"Bazel", "4.2.3"}, {"gloo", ...}, ...:
// what was compiled in and what the build found on its machine ("not found" for a library
// it did not find).
std::vector<std::pair<std::string, std::string>> build_versions();

// The same on one line: "distcomm 0.1.0, gcc 12.2.0, Bazel 4.2.3, gloo ..."
std::string build_versions_line();

}  // namespace distcomm
