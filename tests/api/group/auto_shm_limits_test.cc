// A process limit that keeps shm from running is said, not hidden behind gloo:
//  - under a file size limit (ulimit -f) below a group's segment, "auto" picks gloo and says
//    why (shm's memfd grown past it raised SIGXFSZ, which killed every rank in silence);
//  - with no file descriptor left, auto's warning says `ulimit -n` (the shm plugin's dlopen
//    fails with EMFILE), not "reinstall", and gloo's failure to listen says the process ran
//    out of descriptors, not "set DISTCOMM_SOCKET_IFNAME".
// Each case runs in a forked child (a plugin is loaded once per process; the limits are the
// child's alone), which writes what it saw to a pipe.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "api/errors.h"
#include "api/group/auto_backend.h"
#include "api/plugin/plugin_registry.h"
#include "api/process_group.h"
#include "api/store/hash_store.h"
#include "tests/testing/captured_stderr.h"
#include "tests/testing/child_output.h"

namespace distcomm {
namespace {

using testing::child_output;

// Leaves this process no file descriptor under a lowered soft limit; returns those it took.
std::vector<int> use_up_descriptors() {
  rlimit rl{};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = 256;
  ::setrlimit(RLIMIT_NOFILE, &rl);
  std::vector<int> taken;
  for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) taken.push_back(fd);
  return taken;
}

void give_back(const std::vector<int>& taken) {
  for (int fd : taken) ::close(fd);
}

TEST(AutoShmLimits, FileSizeLimitPicksGlooAndSaysWhy) {
  const std::string said = child_output([] {
    rlimit rl{};
    ::getrlimit(RLIMIT_FSIZE, &rl);
    rl.rlim_cur = 1 << 20;  // ulimit -f 1024
    ::setrlimit(RLIMIT_FSIZE, &rl);
    testing::CapturedStderr captured;
    const std::string placement = auto_backend_placement(PluginSearch::from_environment());
    const bool shm = placement.size() >= 4 && placement.compare(placement.size() - 4, 4, " shm") == 0;
    return std::string(shm ? "(shm chosen)" : "") + captured.text() + "\nkept: " + why_shm_unused();
  });
  EXPECT_EQ(said.find("(shm chosen)"), std::string::npos) << said;
  EXPECT_NE(said.find("warning: auto: shm cannot run here, so ranks of one host use gloo"), std::string::npos) << said;
  EXPECT_NE(said.find("ulimit -f"), std::string::npos) << said;
  EXPECT_NE(said.find("kept: shm cannot run here: "), std::string::npos) << said;
}

TEST(AutoShmLimits, NoDescriptorLeftSaysUlimitN) {
  const std::string said = child_output([] {
    testing::CapturedStderr captured;
    const std::vector<int> taken = use_up_descriptors();
    const std::string placement = auto_backend_placement(PluginSearch::from_environment());
    give_back(taken);
    const bool shm = placement.size() >= 4 && placement.compare(placement.size() - 4, 4, " shm") == 0;
    return std::string(shm ? "(shm chosen)" : "") + captured.text() + "\nkept: " + why_shm_unused();
  });
  EXPECT_EQ(said.find("(shm chosen)"), std::string::npos) << said;
  EXPECT_NE(said.find("ulimit -n"), std::string::npos) << said;
  EXPECT_EQ(said.find("reinstall distcomm"), std::string::npos) << said;
  EXPECT_NE(said.find("kept: "), std::string::npos) << said;
  EXPECT_NE(said.find("kept: ", said.find("kept: ")) + 6, said.size()) << "no reason kept: " << said;
}

TEST(AutoShmLimits, GlooOutOfDescriptorsSaysUlimitNNotIfname) {
  const std::string said = child_output([] {
    load_plugin("gloo", PluginSearch::from_environment());
    ProcessGroupOptions o;
    o.store = std::make_shared<HashStore>();
    o.backend = "gloo";
    const std::vector<int> taken = use_up_descriptors();
    std::string out = "(created)";
    try {
      ProcessGroup::create(o);
    } catch (const std::exception& e) {
      out = e.what();
    }
    give_back(taken);
    return out;
  });
  EXPECT_NE(said.find("ran out of file descriptors"), std::string::npos) << said;
  EXPECT_NE(said.find("ulimit -n"), std::string::npos) << said;
  EXPECT_EQ(said.find("DISTCOMM_SOCKET_IFNAME"), std::string::npos) << said;
}

}  // namespace
}  // namespace distcomm
