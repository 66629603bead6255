// A rank given a trace folder several levels new (DISTCOMM_TRACE_DIR set by hand, with no
// launcher to make it): its dump makes the missing parents too. Before, the dump made only
// the last level, so every dump of the run failed ("cannot create .../rank_0.json.tmp...:
// No such file or directory") and the folder never appeared. A level that cannot be made is
// named with the system's reason (api/process/make_folders.h, shared with the launcher's
// --trace_dir), where the dump said only that a temp file's name was "Not a directory".
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "api/diagnostics/flight_recorder.h"
#include "api/diagnostics/trace_dump.h"
#include "api/errors.h"
#include "api/group/process_environment.h"
#include "api/process/make_folders.h"

namespace distcomm {
namespace {

// A group of one (world rank 5, as the launcher says) whose dumps go to dir; the recorder
// is kept by the caller for the test's length.
std::shared_ptr<FlightRecorder> dump_rank_5_to(const std::string& dir) {
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
  return recorder;
}

TEST(TraceDumpFolder, ADumpMakesTheFolderWithEveryMissingParent) {
  const std::string top = std::string(std::getenv("TEST_TMPDIR")) + "/nested";
  const auto recorder = dump_rank_5_to(top + "/x/y/");  // a trailing slash, as a user may type it
  std::string path;
  ASSERT_NO_THROW(path = write_trace_dump("exit"));
  struct stat st;
  EXPECT_EQ(::stat((top + "/x/y/rank_5.json").c_str(), &st), 0) << path;
  EXPECT_TRUE(S_ISREG(st.st_mode));
}

TEST(TraceDumpFolder, ALevelThatCannotBeMadeIsNamed) {
  const std::string file = std::string(std::getenv("TEST_TMPDIR")) + "/in_the_way";
  std::ofstream(file) << "a file, not a folder\n";
  const auto recorder = dump_rank_5_to(file + "/x/y");
  try {
    write_trace_dump("exit");
    ADD_FAILURE() << "a dump under a file was written";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("trace dump: cannot create " + file + ": it is not a folder"), std::string::npos)
        << e.what();
  }
}

TEST(MakeFolders, MakesEveryLevelAndNamesTheOneThatCannotBe) {
  const std::string top = std::string(std::getenv("TEST_TMPDIR")) + "/made";
  EXPECT_EQ(make_folders(top + "//a/b/"), "");
  struct stat st;
  EXPECT_EQ(::stat((top + "/a/b").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(make_folders(top + "/a/b"), "") << "a folder already there is fine";
  std::ofstream(top + "/a/file") << "x\n";
  EXPECT_EQ(make_folders(top + "/a/file/c"), "cannot create " + top + "/a/file: it is not a folder");
  ASSERT_EQ(::chmod((top + "/a/b").c_str(), 0555), 0);
  if (::geteuid() != 0) {  // root may write anywhere
    EXPECT_EQ(make_folders(top + "/a/b/c"), "cannot create " + top + "/a/b/c: Permission denied");
  }
  ::chmod((top + "/a/b").c_str(), 0755);
}

}  // namespace
}  // namespace distcomm
