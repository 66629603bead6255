// Runs a program of the build as a user would, for the bench's end-to-end tests.
#pragma once

#include <string>
#include <vector>

namespace distcomm {
namespace bench {

struct ProgramOutcome {
  int exit_code = -1;  // 128 + signal when killed
  std::string output;  // stdout and stderr together
};

// Runs argv (argv[0] looked up in $PATH when it has no '/'), in a process group of its
// own that is killed whole after timeout_s, so that a hung rank fails the test instead
// of hanging it.
ProgramOutcome run_program(const std::vector<std::string>& argv, int timeout_s = 120);

// The path of a file of this workspace in the test's runfiles ("tools/bench/bench").
std::string runfile(const std::string& workspace_path);
// A path in the test's private temporary folder.
std::string temp_path(const std::string& name);
std::string read_file(const std::string& path);
// Whether an executable of this name is in $PATH.
bool on_path(const std::string& program);

}  // namespace bench
}  // namespace distcomm
