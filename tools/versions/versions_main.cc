// versions: what this build was made with, one "name: version" line each.
//   $ bazel run //tools:versions
#include <cstdio>

#include "tools/versions/build_versions.h"

int main() {
  for (const auto& [name, version] : distcomm::build_versions()) {
    std::printf("%-13s %s\n", (name + ":").c_str(), version.c_str());
  }
  return 0;
}
