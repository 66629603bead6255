// The launcher's refusals of torchrun's spellings and of values gflags would refuse with its
// own line: each is the launcher's, exit status 2, naming the flag and what to use here.
// Also a job whose ranks need more file descriptors than the launcher may open.
#include <sys/resource.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/tools/launch/launcher_harness.h"

namespace distcomm {
namespace testing {
namespace {

const std::string kProbe = rank_probe_path();

void expect_refused(const std::vector<std::string>& argv, const std::string& names, const std::string& what) {
  const Finished f = run(argv, std::chrono::seconds(30));
  EXPECT_EQ(exit_code(f), 2) << what << ": " << f.err;
  EXPECT_NE(f.err.find(names), std::string::npos) << what << ": " << f.err;
  EXPECT_NE(f.err.find("(usage: launch [flags] -- program [args...]"), std::string::npos) << what << ": " << f.err;
  EXPECT_EQ(f.err.find("ERROR: illegal value"), std::string::npos) << "gflags' own line: " << f.err;
  EXPECT_EQ(f.out, "") << "nothing may start: " << what;
}

// torchrun's --tee takes a stream (0-3) or a map per rank; here it is a switch next to
// --log_dir. Before: gflags' "illegal value '3' specified for bool flag 'tee'" (exit 1), and
// `--tee 3 prog` ran "3" as the program.
TEST(LaunchFlagRefusals, TorchrunsTeeFormsSayWhatToUse) {
  expect_refused({launcher_path(), "--tee=3", "--", kProbe, "env"}, "launch: --tee=3: torchrun's --tee N", "--tee=3");
  expect_refused({launcher_path(), "--tee=0:1,1:2", "--", kProbe, "env"}, "launch: --tee=0:1,1:2: torchrun's --tee N",
                 "--tee=0:1,1:2");
  expect_refused({launcher_path(), "--tee", "3", kProbe, "env"}, "launch: --tee 3: torchrun's --tee N", "--tee 3");
  expect_refused({launcher_path(), "-t", "3", kProbe, "env"}, "launch: unknown flag -t: torchrun's -t N", "-t 3");
  const Finished f = run({launcher_path(), "--tee=3", "--", kProbe, "env"}, std::chrono::seconds(30));
  EXPECT_NE(f.err.find("--log_dir=DIR"), std::string::npos) << f.err;
}

// A number flag given a word: gflags' "illegal value 'abc' specified for double flag" and
// exit 1 before; now the launcher's line, as for every other bad value.
TEST(LaunchFlagRefusals, ANumberFlagGivenAWordIsTheLaunchersRefusal) {
  expect_refused({launcher_path(), "--grace_period_s=abc", "--", kProbe, "env"},
                 "launch: --grace_period_s=abc: expected a number of seconds", "--grace_period_s=abc");
  expect_refused({launcher_path(), "--monitor_interval=abc", "--", kProbe, "env"},
                 "launch: --monitor_interval=abc: expected a number", "--monitor_interval=abc");
  expect_refused({launcher_path(), "--grace_period_s", "abc", "--", kProbe, "env"},
                 "launch: --grace_period_s=abc: expected a number of seconds", "--grace_period_s abc");
  expect_refused({launcher_path(), "--max_restarts=two", "--", kProbe, "env"},
                 "launch: --max_restarts=two: expected a whole number", "--max_restarts=two");
  expect_refused({launcher_path(), "--standalone=maybe", "--", kProbe, "env"},
                 "launch: --standalone=maybe: expected true or false", "--standalone=maybe");
  // What gflags takes still runs.
  const Finished ok = run(launch({"--grace_period_s=0.5", "--monitor_interval=1", "--standalone=true"}, {kProbe, "env"}),
                          std::chrono::seconds(30));
  EXPECT_EQ(exit_code(ok), 0) << ok.err;
}

// Before: --nproc_per_node=100000 was taken, and thousands of ranks were forked before a
// pipe failed with "Too many open files". Now refused before any rank starts, with the
// numbers, when even the hard limit is too low (`ulimit -n` in a shell sets both).
TEST(LaunchFlagRefusals, MoreRanksThanTheHardDescriptorLimitAllowsAreRefused) {
  std::vector<std::string> argv = {"/bin/sh", "-c", "ulimit -n 256 && exec \"$@\"", "sh"};
  for (const std::string& a : launch({"--nproc_per_node=200"}, {kProbe, "env"})) argv.push_back(a);
  const Finished f = run(argv, std::chrono::seconds(30));
  EXPECT_EQ(exit_code(f), 2) << f.err;
  // Node 0 serves the store: 3 per rank, and a connection for each of the job's 200 ranks.
  EXPECT_NE(f.err.find("launch: --nproc_per_node=200: the launcher holds 3 file descriptors per rank"),
            std::string::npos)
      << f.err;
  EXPECT_NE(f.err.find("one connection per rank of the job (200)"), std::string::npos) << f.err;
  EXPECT_NE(f.err.find("its hard limit (RLIMIT_NOFILE, ulimit -Hn) is 256"), std::string::npos) << f.err;
  EXPECT_EQ(f.out, "") << "no rank may start";
  EXPECT_EQ(f.err.find("[rank"), std::string::npos) << f.err;
}

// A soft limit too low under a hard limit high enough: the launcher raises its soft limit,
// and the job runs. Before: refused on the soft limit (torchrun's users get the system's
// default, often the hard limit). The ranks inherit the raised limit.
TEST(LaunchFlagRefusals, ALowSoftDescriptorLimitIsRaisedAndTheJobRuns) {
  rlimit rl{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &rl), 0);
  if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < 1024) GTEST_SKIP() << "hard limit " << rl.rlim_max;
  std::vector<std::string> argv = {"/bin/sh", "-c", "ulimit -Sn 64 && exec \"$@\"", "sh"};
  for (const std::string& a : launch({"--nproc_per_node=24"}, {kProbe, "env"})) argv.push_back(a);
  const Finished f = run(argv, std::chrono::seconds(60));
  EXPECT_EQ(exit_code(f), 0) << f.err;
  EXPECT_EQ(f.err.find("RLIMIT_NOFILE"), std::string::npos) << f.err;
}

}  // namespace
}  // namespace testing
}  // namespace distcomm
