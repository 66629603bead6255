// --trace_dir several levels new: the launcher makes it with every missing parent before a
// rank starts (torchrun makes its --log-dir the same way), and refuses at start a folder
// that cannot be made. Before, only the last level was made: every rank's dump and the
// launcher's record were lost ("cannot create .../rank_0.json.tmp...: No such file or
// directory", "launch: cannot write .../launcher_node0.json"), and nobody knew until the
// job had failed.
#include <sys/stat.h>

#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "tests/tools/launch/launcher_harness.h"

namespace distcomm {
namespace testing {
namespace {

using std::chrono::seconds;

const auto* const kAdoptOrphans = ::testing::AddGlobalTestEnvironment(new AdoptOrphans);

bool is_folder(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

TEST(TraceFolder, AFolderSeveralLevelsNewIsMadeWithItsParents) {
  const std::string top = temp_path("trace_new");
  const std::string dir = top + "/a/b/c";
  // Each rank looks for its folder as it starts: it is there before any rank runs.
  const Finished f = run(launch({"--nproc_per_node=2", "--trace_dir=" + dir},
                                {"/bin/sh", "-c", "test -d \"$DISTCOMM_TRACE_DIR\" && echo folder there"}),
                         seconds(60));
  EXPECT_EQ(exit_code(f), 0) << f.err;
  EXPECT_TRUE(is_folder(dir));
  EXPECT_EQ(f.err.find("cannot write"), std::string::npos) << f.err;
  struct stat st;
  EXPECT_EQ(::stat((dir + "/launcher_node0.json").c_str(), &st), 0) << f.err;
  EXPECT_NE(f.out.find("[rank 0] folder there"), std::string::npos) << f.out;
  EXPECT_NE(f.out.find("[rank 1] folder there"), std::string::npos) << f.out;
  EXPECT_TRUE(no_orphan_running());
}

TEST(TraceFolder, AFolderThatCannotBeMadeIsRefusedBeforeAnyRankStarts) {
  const std::string file = temp_path("trace_file");
  std::ofstream(file) << "not a folder\n";
  const Finished f = run(launch({"--nproc_per_node=2", "--trace_dir=" + file + "/x/y"}, {rank_probe_path(), "env"}),
                         seconds(60));
  EXPECT_EQ(exit_code(f), 1) << f.err;
  EXPECT_NE(f.err.find("launch: cannot start the job: --trace_dir=" + file + "/x/y: cannot create " + file +
                       ": it is not a folder"),
            std::string::npos)
      << f.err;
  EXPECT_EQ(f.out.find("[rank "), std::string::npos) << f.out;
  EXPECT_TRUE(no_orphan_running());
}

}  // namespace
}  // namespace testing
}  // namespace distcomm
