// An install whose shm plugin is damaged (here: a file that is no shared object ahead of any
// other) still runs a one-host job under "auto", over gloo, but says why once: before, auto
// fell back to gloo in silence, several times slower. This test's runfiles carry gloo alone.
#include <sys/stat.h>

#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "api/errors.h"
#include "api/group/auto_backend.h"
#include "api/plugin/plugin_registry.h"
#include "tests/testing/captured_stderr.h"
#include "tests/testing/test_files.h"

namespace distcomm {
namespace {

TEST(AutoWithARefusedShm, SaysWhyItRunsGloo) {
  const std::string dir = testing::temp_path("damaged_plugins");
  ::mkdir(dir.c_str(), 0700);
  std::ofstream(dir + "/libdistcomm_shm.so") << "garbage, as after a bad copy";
  PluginSearch search;
  search.plugin_path = {dir};
  ASSERT_THROW(load_plugin("shm", search), BackendUnavailable) << "this test must run without a usable shm";

  testing::CapturedStderr captured;
  const std::string placement = auto_backend_placement(search, "", false, false, "");
  auto_backend_placement(search, "", false, false, "");  // asked again: said once
  const std::string said = captured.text();
  const std::string expected = "warning: auto: the shm plugin cannot be loaded, so ranks of one host use gloo between "
                               "them (much slower): " + dir + "/libdistcomm_shm.so: refused: ";
  const size_t first = said.find(expected);
  EXPECT_NE(first, std::string::npos) << said;
  EXPECT_EQ(said.find(expected, first + 1), std::string::npos) << "said twice: " << said;
  EXPECT_NE(said.find("reinstall distcomm or fix DISTCOMM_PLUGIN_PATH"), std::string::npos) << said;
}

}  // namespace
}  // namespace distcomm
