// What a test asks of its own process's threads.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

namespace distcomm {
namespace testing {

// The threads of this process named `name` (/proc/self/task/*/comm, as pthread_setname_np
// set it).
inline int threads_named(const std::string& name) {
  int n = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string line;
    if (std::getline(comm, line) && line == name) ++n;
  }
  return n;
}

}  // namespace testing
}  // namespace distcomm
