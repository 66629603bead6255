// The launcher's own command line, refused before any rank starts: what a refusal names when
// a value came from PET_<FLAG> rather than a flag, and the usage in the name it was run as.
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/tools/launch/launcher_harness.h"

namespace distcomm {
namespace testing {
namespace {

const std::string kProbe = rank_probe_path();

// A value from PET_<FLAG> is refused naming that variable: the user never typed the flag
// (before: "--nproc_per_node=x: ..."). A flag the command line gives is named as the flag.
TEST(LaunchCommandLine, AValueFromAPetVariableIsRefusedNamingTheVariable) {
  struct Case {
    std::vector<std::string> env;
    std::vector<std::string> flags;
    std::string named, not_named;
  };
  for (const Case& c : std::vector<Case>{
           {{"PET_NPROC_PER_NODE=x"}, {}, "launch: PET_NPROC_PER_NODE=x: expected a number of ranks, or cpu, gpu or auto",
            "--nproc_per_node"},
           {{"PET_NPROC_PER_NODE=0"}, {}, "PET_NPROC_PER_NODE=0: must be at least 1", "--nproc_per_node"},
           {{"PET_ON_FAILURE=maybe"}, {}, "PET_ON_FAILURE=maybe: expected stop", "--on_failure"},
           {{"PET_NNODES=2", "PET_MASTER_PORT=1234"}, {"--max_restarts=1"},
            "--max_restarts=1: with PET_NNODES=2 the launchers", "--nnodes"},
           {{"PET_NPROC_PER_NODE=x"}, {"--nproc_per_node=many"},
            "launch: --nproc_per_node=many: expected a number of ranks", "PET_NPROC_PER_NODE"},
       }) {
    Finished f = run(launch(c.flags, {kProbe, "env"}), std::chrono::seconds(30), c.env);
    EXPECT_EQ(exit_code(f), 2) << c.named << ": " << f.err;
    EXPECT_NE(f.err.find(c.named), std::string::npos) << f.err;
    EXPECT_EQ(f.err.find(c.not_named), std::string::npos) << f.err;
    EXPECT_EQ(f.out, "") << "nothing may start: " << c.named;
  }
}

// A flag whose value cannot work is refused before a rank starts, as --log_dir's is:
// --timeline in a folder that is not there (before: every rank ran, then each said
// "timeline: cannot open ...", and the job exited 0); --dump_wait_s without a trace folder,
// which it would not affect (as --tee without --log_dir).
TEST(LaunchCommandLine, ATimelineWithoutItsFolderAndADumpWaitWithoutATraceDirAreRefused) {
  const std::string missing = temp_path("no_such_folder") + "/t.json";
  for (const auto& [flags, named] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--timeline=" + missing}, "launch: --timeline=" + missing + ": no folder "},
           {{"--dump_wait_s=2"}, "launch: --dump_wait_s=2"},
       }) {
    Finished f = run(launch(flags, {kProbe, "env"}), std::chrono::seconds(30));
    EXPECT_EQ(exit_code(f), 2) << named << ": " << f.err;
    EXPECT_NE(f.err.find(named), std::string::npos) << f.err;
    EXPECT_EQ(f.out, "") << "nothing may start: " << named;
  }
  // With a trace folder it is the ranks' time to dump.
  Finished ok = run(launch({"--dump_wait_s=2", "--trace_dir=" + temp_path("dump_wait_trace")}, {kProbe, "env"}),
                    std::chrono::seconds(30));
  EXPECT_EQ(exit_code(ok), 0) << ok.err;
}

// Installed, the launcher is distcomm-launch: its usage says so, and its example is not a
// path under bazel-bin/ that an installed copy's user does not have.
TEST(LaunchCommandLine, TheUsageNamesTheProgramAsItWasRun) {
  const std::string installed = temp_path("bin");
  ::mkdir(installed.c_str(), 0755);
  const std::string distcomm_launch = installed + "/distcomm-launch";
  ::unlink(distcomm_launch.c_str());
  ASSERT_EQ(::symlink(launcher_path().c_str(), distcomm_launch.c_str()), 0) << distcomm_launch;

  Finished help = run({distcomm_launch, "--help"});
  ASSERT_EQ(exit_code(help), 0) << help.err;
  EXPECT_NE(help.out.find("usage: distcomm-launch [flags] -- program [args...]\n"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("example: distcomm-launch --nproc_per_node=3 -- "), std::string::npos) << help.out;
  EXPECT_EQ(help.out.find("bazel-bin"), std::string::npos) << help.out;

  Finished refused = run({distcomm_launch, "--bogus", "--", kProbe, "env"});
  EXPECT_EQ(exit_code(refused), 2) << refused.err;
  EXPECT_NE(refused.err.find("(usage: distcomm-launch [flags] -- program [args...]; distcomm-launch --help lists the "
                             "flags)"),
            std::string::npos)
      << refused.err;

  // In the tree it is launch.
  Finished in_tree = run(launch({"--help"}, {}));
  EXPECT_NE(in_tree.out.find("usage: launch [flags] -- program [args...]\n"), std::string::npos) << in_tree.out;
}

}  // namespace
}  // namespace testing
}  // namespace distcomm
