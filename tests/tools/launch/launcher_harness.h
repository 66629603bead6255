// What the launcher's end-to-end tests share: the command lines, and the checks that
// nothing of a job is left behind (processes, files).
#pragma once

#include <dirent.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cerrno>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/testing/subprocess.h"

namespace distcomm {
namespace testing {

inline const std::string& launcher_path() {
  static const std::string path = runfile("tools/launch/launch");
  return path;
}

inline const std::string& rank_probe_path() {
  static const std::string path = runfile("tests/tools/launch/rank_probe");
  return path;
}

// launch <flags> -- <command>
inline std::vector<std::string> launch(const std::vector<std::string>& flags, const std::vector<std::string>& command) {
  std::vector<std::string> argv = {launcher_path()};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.push_back("--");
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

// The test process adopts what a launcher leaves behind (a child subreaper), so a rank or
// a grandchild the launcher did not reap shows up here (no_orphan_running, zombies seen by
// process_exists) instead of being reaped quietly by init. Each test file registers it:
//   const auto* const kAdoptOrphans = ::testing::AddGlobalTestEnvironment(new AdoptOrphans);
class AdoptOrphans : public ::testing::Environment {
 public:
  void SetUp() override { ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0); }
};

// Reaps what came to this process (the ranks of a killed launcher, killed with it); true
// when none of it still runs.
inline bool no_orphan_running() {
  pid_t r;
  while ((r = ::waitpid(-1, nullptr, WNOHANG)) > 0) {
  }
  return r == -1 && errno == ECHILD;
}

// An empty folder of its own in the test's temporary folder, to give a launcher as
// TMPDIR: what is left in it after the job are files the launcher forgot.
inline std::string fresh_tmpdir(const std::string& name) {
  const std::string dir = temp_path(name);
  ::mkdir(dir.c_str(), 0700);
  return dir;
}

inline std::vector<std::string> entries_of(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") names.push_back(e->d_name);
    }
    ::closedir(d);
  }
  return names;
}

}  // namespace testing
}  // namespace distcomm
