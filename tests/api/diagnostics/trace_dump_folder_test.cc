// A rank given a trace folder several levels new (DISTCOMM_TRACE_DIR set by hand, with no
// launcher to make it): its dump makes the missing parents too. Before, the dump made only
// the last level, so every dump of the run failed ("cannot create .../rank_0.json.tmp...:
// No such file or directory") and the folder never appeared.
#include <sys/stat.h>

#include <cstdlib>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "api/diagnostics/flight_recorder.h"
#include "api/diagnostics/trace_dump.h"
#include "api/group/process_environment.h"

namespace distcomm {
namespace {

TEST(TraceDumpFolder, ADumpMakesTheFolderWithEveryMissingParent) {
  const std::string top = std::string(std::getenv("TEST_TMPDIR")) + "/nested";
  const std::string dir = top + "/x/y/";  // a trailing slash, as a user may type it
  auto recorder = std::make_shared<FlightRecorder>(16);
  TraceGroupInfo info;
  info.name = "world";
  info.rank = 0;
  info.size = 1;
  info.global_ranks = {5};
  info.backend = "gloo";
  recorder->set_info(info);
  TraceSettings settings;
  settings.dump_dir = dir;
  settings.launcher_rank = 5;
  register_for_dumps(recorder, settings);

  std::string path;
  ASSERT_NO_THROW(path = write_trace_dump("exit"));
  struct stat st;
  EXPECT_EQ(::stat((top + "/x/y/rank_5.json").c_str(), &st), 0) << path;
  EXPECT_TRUE(S_ISREG(st.st_mode));
}

}  // namespace
}  // namespace distcomm
