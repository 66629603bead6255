// Fewer than min_members left while the launcher's replacements are due (ft/replacement_wait.h,
// launch/replacement_notice.h), with real processes: examples/ft_train at 4 ranks, 3 of which
// SIGKILL themselves in the same step (--kill_ranks), --min_members=2.
//
// A chaos soak found the survivor alone 0.1 s after the kill, stopping the job with "only 1
// member is left", and the launcher's replacements coming 1 s later, too late. Now the
// survivor waits for them (up to its recovery timeout), takes them in, and the job ends with
// 4 members, identical weights, exit 0. Where no replacement is due (no --replace_after_s, or
// its replacements used up) it stops at once as before, well within its recovery timeout.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "tests/testing/subprocess.h"

namespace distcomm {
namespace testing {
namespace {

using Clock = std::chrono::steady_clock;

std::string ft_train() { return runfile("examples/ft_train"); }

// 3 of 4 ranks die in step 10 of 40; the survivor must not stop while replacements are due.
const std::vector<std::string> kTraining = {"--kill_ranks=1,2,3", "--kill_step=10", "--steps=40", "--min_members=2",
                                            "--log_every=0"};
constexpr int kRecoveryTimeoutS = 30;  // far above what any of these runs should take

std::vector<std::string> with(std::vector<std::string> head, const std::vector<std::string>& tail) {
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

struct Timed {
  Finished f;
  double seconds = 0;
};

// backend "": the default (auto: shm on one host).
Timed run_timed(const std::vector<std::string>& argv, const std::string& backend = "") {
  const Clock::time_point start = Clock::now();
  Timed t;
  t.f = run(argv, std::chrono::seconds(25), {"DISTCOMM_BACKEND=" + backend});
  t.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return t;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The soak's scenario, run by hand (ft_train launches its own ranks and replaces each
// failed one after --replace_after_s=1), over shm and gloo.
TEST(FtReplacementWait, ThreeOfFourKilledTheSurvivorWaitsForTheReplacements) {
  for (const std::string backend : {"", "gloo"}) {
    SCOPED_TRACE("backend '" + backend + "'");
    const Timed t = run_timed(with({ft_train(), "--nproc=4", "--replace_after_s=1",
                                    "--recovery_timeout_s=" + std::to_string(kRecoveryTimeoutS)},
                                   kTraining),
                              backend);
    const std::string all = t.f.out + t.f.err;
    ASSERT_FALSE(t.f.timed_out) << all;
    EXPECT_EQ(exit_code(t.f), 0) << all;
    EXPECT_FALSE(has(all, "fewer than the program's minimum of 2; stopping")) << all;
    EXPECT_TRUE(has(all, "only 1 member is left in generation ")) << all;  // the wait's own line
    EXPECT_TRUE(has(all, "(its recovery timeout) for the replacements its launcher announced")) << all;
    // Every replacement joined: 4 members at the end, all with the same weights.
    for (const char* id : {"rank0:", "rank1+1:", "rank2+1:", "rank3+1:"}) {
      EXPECT_TRUE(has(all, std::string(id) + " ")) << id << "\n" << all;
    }
    size_t identical = 0;
    const std::string same = "weights identical";
    for (size_t at = all.find(same); at != std::string::npos; at = all.find(same, at + 1)) ++identical;
    EXPECT_EQ(identical, 4u) << all;
    EXPECT_FALSE(has(all, "DIFFER")) << all;
    EXPECT_LT(t.seconds, 20.0) << all;
  }
}

// No replacement due: run by hand with --replace_after_s=-1 (its launcher replaces nobody,
// and says nothing). The survivor stops as before, at once.
TEST(FtReplacementWait, NoReplacementDueTheSurvivorStopsAtOnce) {
  const Timed t = run_timed(with({ft_train(), "--nproc=4", "--replace_after_s=-1",
                                  "--recovery_timeout_s=" + std::to_string(kRecoveryTimeoutS)},
                                 kTraining));
  const std::string all = t.f.out + t.f.err;
  ASSERT_FALSE(t.f.timed_out) << all;
  EXPECT_NE(exit_code(t.f), 0) << all;
  EXPECT_TRUE(has(all, "only 1 member is left in generation ")) << all;
  EXPECT_TRUE(has(all, "fewer than the program's minimum of 2; stopping; no replacement is announced")) << all;
  EXPECT_FALSE(has(all, "waiting up to")) << all;
  // Start-up, 10 steps and the stop: seconds, not the recovery timeout.
  EXPECT_LT(t.seconds, kRecoveryTimeoutS * 2.0 / 3) << all;  // well under it on a loaded host
}

// Its replacements used up (tools/launch --max_replacements=0): the launcher says so for
// each rank that ended ("none"), and the survivor stops as soon as it reads that.
TEST(FtReplacementWait, ReplacementsUsedUpTheSurvivorStopsAtOnce) {
  const Timed t =
      run_timed(with({runfile("tools/launch/launch"), "--nproc_per_node=4", "--on_failure=continue",
                      "--replace_after_s=1", "--max_replacements=0", "--", ft_train(),
                      "--recovery_timeout_s=" + std::to_string(kRecoveryTimeoutS)},
                     kTraining));
  const std::string all = t.f.out + t.f.err;
  ASSERT_FALSE(t.f.timed_out) << all;
  EXPECT_NE(exit_code(t.f), 0) << all;
  // The survivor says why it does not wait (it said only "stopping" before).
  EXPECT_TRUE(has(all, "fewer than the program's minimum of 2; stopping; not replaced: ")) << all;
  // The launcher's own line: with a budget of 0 no replacement was ever due.
  EXPECT_TRUE(has(all, "(--on_failure=continue); not replaced: replacements are off (--max_replacements=0)")) << all;
  EXPECT_FALSE(has(all, "has had 0 replacements")) << all;
  // With a budget of 0, the launcher's word that the survivor quotes says that replacements
  // are off ("rank 1 has had 0 replacements" read as if some had been due).
  EXPECT_TRUE(has(all, "; not replaced: rank1: not replaced: replacements are off (--max_replacements=0)")) << all;
  EXPECT_FALSE(has(all, "waiting up to")) << all;
  EXPECT_LT(t.seconds, kRecoveryTimeoutS * 2.0 / 3) << all;  // well under it on a loaded host
}

}  // namespace
}  // namespace testing
}  // namespace distcomm
