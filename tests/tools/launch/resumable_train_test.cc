// examples/resumable_train under the real launcher with --max_restarts: a rank killed in
// the middle of training, the job restarted from rank 0's newest checkpoint, and the run
// ends with the loss of one that was never interrupted.
#include <algorithm>
#include <filesystem>
#include <regex>

#include <gtest/gtest.h>

#include "tests/tools/launch/launcher_harness.h"

namespace distcomm {
namespace testing {
namespace {

using std::chrono::seconds;

const std::string kLaunch = launcher_path();
const std::string kTrain = runfile("examples/resumable_train");

struct TrainingRun {
  Finished finished;
  double final_loss = -1;
};

TrainingRun train(const std::string& backend, const std::string& dir, std::vector<std::string> extra_flags,
          std::vector<std::string> launcher_flags = {}, int nproc = 3) {
  std::vector<std::string> argv = {kLaunch, "--nproc_per_node=" + std::to_string(nproc), "--backend=" + backend};
  argv.insert(argv.end(), launcher_flags.begin(), launcher_flags.end());
  argv.insert(argv.end(), {"--", kTrain, "--checkpoint_dir=" + temp_path(dir), "--steps=120", "--checkpoint_every=20"});
  argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
  TrainingRun r;
  r.finished = run(argv, seconds(120));
  std::smatch m;
  if (std::regex_search(r.finished.out, m, std::regex(R"(\[rank 0\] final loss (\S+) after 120 steps)"))) {
    r.final_loss = std::stod(m[1]);
  }
  return r;
}

class ResumableTrain : public ::testing::TestWithParam<std::string> {};

TEST_P(ResumableTrain, AKilledRankCostsNothingButTime) {
  const std::string backend = GetParam();
  // --log_every=0: only the final line (the example divided by it: SIGFPE on every rank).
  TrainingRun reference = train(backend, "reference_" + backend, {"--log_every=0"});
  ASSERT_EQ(exit_code(reference.finished), 0) << reference.finished.err;
  ASSERT_GT(reference.final_loss, 0) << reference.finished.out;

  TrainingRun interrupted = train(backend, "interrupted_" + backend, {"--fail_at_step=45", "--fail_rank=2"}, {"--max_restarts=2"});
  const Finished& f = interrupted.finished;
  ASSERT_EQ(exit_code(f), 0) << f.err;
  EXPECT_NE(f.out.find("[rank 2] rank 2 kills itself at step 45"), std::string::npos) << f.out;
  EXPECT_TRUE(std::regex_search(f.err, std::regex(R"(launch: rank 2 failed \(signal SIGKILL \(Killed\)\); restart 1 of 2 in \d+\.\d s)")))
      << f.err;
  EXPECT_EQ(f.err.find("restart 2 of 2"), std::string::npos) << "the restarted job must run through: " << f.err;
  EXPECT_NE(f.out.find("[rank 0] resuming from " + temp_path("interrupted_" + backend) + "/step_0000000040.ckpt (step 40)"),
            std::string::npos)
      << f.out;
  // The same steps on the same data from the same state: the same loss, to float rounding.
  EXPECT_NEAR(interrupted.final_loss, reference.final_loss, 1e-6 * reference.final_loss)
      << "reference:\n" << reference.finished.out << "interrupted:\n" << f.out;
}

INSTANTIATE_TEST_SUITE_P(Backends, ResumableTrain, ::testing::Values("gloo", "shm"));

// Rank 0's progress lines of the attempt the launcher stops (SIGTERM) and restarts: its
// stdout is a pipe to the launcher, which a block-buffered stdout never flushed before the
// signal ended it, so the first attempt's lines were lost.
TEST(ResumableTrainAlone, TheStoppedAttemptsProgressLinesAreKept) {
  TrainingRun r = train("shm", "progress", {"--fail_at_step=45", "--fail_rank=2", "--log_every=10"},
                        {"--max_restarts=1"});
  const Finished& f = r.finished;
  ASSERT_EQ(exit_code(f), 0) << f.err;
  // Steps 10 to 40 ran only in the first attempt (the second resumes from step 40).
  EXPECT_NE(f.out.find("[rank 0] first step of this attempt (1) done"), std::string::npos) << f.out;
  for (int step : {10, 20, 30, 40}) {
    EXPECT_NE(f.out.find("[rank 0] step " + std::to_string(step) + "/120: loss "), std::string::npos) << f.out;
  }
  EXPECT_NE(f.out.find("[rank 0] resuming from "), std::string::npos) << f.out;
}

TEST(ResumableTrainAlone, ANewRunInAFolderOfAFinishedOneHasNothingLeftToDo) {
  TrainingRun first = train("gloo", "finished", {});
  ASSERT_EQ(exit_code(first.finished), 0) << first.finished.err;
  TrainingRun again = train("gloo", "finished", {});
  ASSERT_EQ(exit_code(again.finished), 0) << again.finished.err;
  EXPECT_NE(again.finished.out.find("the checkpoint is of step 120: nothing left to train"), std::string::npos)
      << again.finished.out;
}

// A checkpoint of another model (another --hidden) was fatal in the copy, naming neither
// file nor tensor: it is skipped for the older one, by name. One written by a run of
// another world size is resumed, with a line saying so.
TEST(ResumableTrainAlone, ACheckpointOfAnotherModelIsSkippedAndAnotherWorldSizeSaid) {
  TrainingRun two_ranks = train("gloo", "mixed", {"--steps=20"}, {}, /*nproc=*/2);
  ASSERT_EQ(exit_code(two_ranks.finished), 0) << two_ranks.finished.err;
  TrainingRun narrower = train("gloo", "mixed_narrower", {"--steps=40", "--hidden=32"});
  ASSERT_EQ(exit_code(narrower.finished), 0) << narrower.finished.err;
  const std::string dir = temp_path("mixed");
  std::filesystem::copy_file(temp_path("mixed_narrower") + "/step_0000000040.ckpt", dir + "/step_0000000040.ckpt");

  TrainingRun resumed = train("gloo", "mixed", {"--steps=40"});
  const Finished& f = resumed.finished;
  ASSERT_EQ(exit_code(f), 0) << f.err;
  const std::string said = f.out + f.err;
  EXPECT_NE(said.find("skipping checkpoint " + dir + "/step_0000000040.ckpt: tensor 'fc0.weight' is float32[16, 32] "
                      "in the file but float32[16, 64] in the model"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("resuming from " + dir + "/step_0000000020.ckpt (step 20)"), std::string::npos) << said;
  EXPECT_NE(said.find(dir + "/step_0000000020.ckpt was written by a run of 2 ranks, this one has 3"), std::string::npos)
      << said;
}

// Pointed at another model's folder, a run started at step 0 there and, with
// --keep_checkpoints, deleted that model's checkpoints. It stops before training, saying
// why, and the other model's files are all still there.
TEST(ResumableTrainAlone, AFolderOfAnotherModelsCheckpointsIsLeftAlone) {
  TrainingRun narrower = train("gloo", "other_models_folder", {"--steps=40", "--hidden=32"});
  ASSERT_EQ(exit_code(narrower.finished), 0) << narrower.finished.err;
  const std::string dir = temp_path("other_models_folder");
  std::vector<std::string> before;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) before.push_back(entry.path().filename());
  ASSERT_FALSE(before.empty());

  TrainingRun wider = train("gloo", "other_models_folder", {"--steps=40"});
  const Finished& f = wider.finished;
  EXPECT_NE(exit_code(f), 0) << f.out;
  const std::string said = f.out + f.err;
  EXPECT_NE(said.find(dir + " holds " + std::to_string(before.size()) + " checkpoint(s) and none is of this model"),
            std::string::npos)
      << said;
  std::vector<std::string> after;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) after.push_back(entry.path().filename());
  std::sort(before.begin(), before.end());
  std::sort(after.begin(), after.end());
  EXPECT_EQ(after, before) << "the other model's checkpoints were touched";
}

}  // namespace
}  // namespace testing
}  // namespace distcomm
