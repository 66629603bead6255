// ft::Manager (manager_harness.h) when a step fails on every member the same way each time:
// a program error, not a lost rank. The job must end with one StepKeepsFailing on every
// member after kSameStepFailures generations, not form generations for ever (an outside
// user's job re-formed hundreds of them without a step committed). Failures that retrying
// cures, and members lost one after another in the same step, must still be recovered from.
#include "tests/ft/manager_harness.h"

namespace distcomm {
namespace {

// What a program error says: every member's DDP constructor throws it, at the same step.
constexpr char kProgramError[] = "bucket_cap_mb is -5: expected a positive number of megabytes";

// The step's error, thrown and caught as the documented loop does.
void fail_step(Member& m) {
  try {
    throw InvalidArgument(kProgramError);
  } catch (const Error& e) {
    m.ft->step_failed(e.what());
  }
}

// Without the fix the members redo the step for ever: each stops for good at the begin_step
// of its 10th redo (all of them there, so none waits for another), so that the test ends and
// fails instead of hanging.
constexpr int kGiveUpAfterRedos = 10;
bool looped(Member& m) { return m.redone >= kGiveUpAfterRedos; }

// Every member's error is StepKeepsFailing's, naming the step, the generations and the first
// failure.
void expect_stopped_at(const std::vector<Member*>& members, uint64_t step, uint64_t first_generation) {
  const std::string generations = "generations " + std::to_string(first_generation) + " to " +
                                  std::to_string(first_generation + ft::kSameStepFailures - 1);
  for (Member* m : members) {
    EXPECT_FALSE(m->stopped.load()) << m->id << " redid step " << step << " " << m->redone << " times";
    EXPECT_TRUE(contains(m->error, "step " + std::to_string(step) + " failed in " +
                                       std::to_string(ft::kSameStepFailures) + " generations in a row"))
        << m->id << ": " << m->error;
    EXPECT_TRUE(contains(m->error, generations)) << m->id << ": " << m->error;
    EXPECT_TRUE(contains(m->error, "not a lost rank but an error that every member hits")) << m->error;
    // "member '<the member that wrote the verdict>': <its error>"
    EXPECT_TRUE(contains(m->error, "The first failure: member 'rank") && contains(m->error, kProgramError)) << m->error;
    EXPECT_EQ(m->ft->committed_steps(), step) << m->id;
    EXPECT_EQ(m->redone, ft::kSameStepFailures - 1) << m->id;  // the last failure throws instead
    // It stays stopped: a program that calls on forms no other generation.
    EXPECT_THROW(m->ft->begin_step({&m->state}), ft::StepKeepsFailing) << m->id;
  }
}

// a. Every member throws InvalidArgument in step 2, each time: after kSameStepFailures
// generations every member ends with StepKeepsFailing, within seconds.
TEST_F(FtManager, AStepThatFailsOnEveryMemberEachTimeEndsTheJobWithOneError) {
  constexpr uint64_t kSteps = 6, kFails = 2;
  std::vector<Member*> members = first_members(3);
  Script script;
  script.die_at = [](Member& m, uint64_t, const ProcessGroupPtr&) { return looped(m); };
  script.after_op = [](Member& m, uint64_t s) {
    if (s == kFails) fail_step(m);
  };
  const auto start = Clock::now();
  train_all(members, kSteps, script);
  const double took_s = std::chrono::duration<double>(Clock::now() - start).count();
  expect_stopped_at(members, kFails, 1);
  std::vector<uint64_t> generations;
  for (uint64_t g = 1; g <= uint64_t(ft::kSameStepFailures); ++g) generations.push_back(g);
  for (Member* m : members) {
    EXPECT_EQ(m->generations, generations) << m->id;
    EXPECT_EQ(m->applied.size(), kFails) << m->id;  // steps 0 and 1, once each
  }
  // A few generations of an in_process group: well under a second each, even under load.
  EXPECT_LT(took_s, 15.0);
}

// b. Every member fails step 2 in one generation less than kSameStepFailures (a transient
// error): the job goes on, step 2 redone and applied once. Then step 4 fails every time: the
// commits in between start the count again, so the job ends naming step 4, after
// kSameStepFailures generations of its own.
TEST_F(FtManager, ATransientFailureOnEveryMemberIsRedoneAndTheCountStartsAgainAfterACommit) {
  constexpr uint64_t kSteps = 8, kTransient = 2, kBroken = 4;
  std::vector<Member*> members = first_members(3);
  Script script;
  script.die_at = [](Member& m, uint64_t, const ProcessGroupPtr&) { return looped(m); };
  script.after_op = [](Member& m, uint64_t s) {
    const bool transient = s == kTransient && m.redone < ft::kSameStepFailures - 1;
    if (transient || s == kBroken) fail_step(m);
  };
  train_all(members, kSteps, script);
  // Generation 1 failed step 2, generation 2 too; generation 3 committed 2 and 3, then failed
  // step 4 first: the run of step 4 is generations 3 to 5.
  const uint64_t first_of_step4 = uint64_t(ft::kSameStepFailures);
  for (Member* m : members) {
    EXPECT_FALSE(m->stopped.load()) << m->id;
    EXPECT_TRUE(contains(m->error, "step 4 failed in " + std::to_string(ft::kSameStepFailures) + " generations")) << m->error;
    EXPECT_TRUE(contains(m->error, "generations " + std::to_string(first_of_step4) + " to ")) << m->error;
    EXPECT_EQ(m->ft->committed_steps(), kBroken) << m->id;
    EXPECT_EQ(m->generation_starts.at(size_t(ft::kSameStepFailures - 1)), kTransient) << m->id;
    EXPECT_EQ(m->redone, 2 * (ft::kSameStepFailures - 1)) << m->id;
  }
  // Steps 0..3 applied once each, by every member, with every member's contribution.
  std::vector<float> expected = initial_state();
  for (uint64_t s = 0; s < kBroken; ++s) {
    const std::vector<float> sum = step_sum(all_of(3), s);
    for (int64_t e = 0; e < kElements; ++e) expected[size_t(e)] += sum[size_t(e)];
  }
  for (Member* m : members) {
    EXPECT_EQ(m->applied.size(), kBroken) << m->id;
    EXPECT_EQ(values(m->state), expected) << m->id;
  }
}

// c. Real faults are recovered from as before, even in one step: rank3, then rank2, then
// rank1 die in step 2, each in the next generation (more failures of one step than
// kSameStepFailures, but each with other members). rank0 alone commits step 2 and goes on;
// then step 4 fails on it every time, and it ends naming only the generations of that step.
TEST_F(FtManager, MembersLostOneAfterAnotherInOneStepAreRecoveredFrom) {
  constexpr uint64_t kSteps = 8, kDeaths = 2, kBroken = 4;
  std::vector<Member*> members = first_members(4);
  Script script;
  script.die_at = [&](Member& m, uint64_t s, const ProcessGroupPtr& pg) {
    if (looped(m)) return true;
    // In generation n (1..3) of step 2, rank<4-n> dies: it stops, and its dead mark is written,
    // as a launcher that saw its process exit would.
    const uint64_t g = m.ft->generation().number;
    if (s != kDeaths || g > 3 || m.id != "rank" + std::to_string(4 - int(g))) return false;
    m.held = pg;
    mark_dead(m.id, "killed by the test");
    return true;
  };
  script.after_op = [](Member& m, uint64_t s) {
    if (s == kBroken) fail_step(m);
  };
  train_all(members, kSteps, script);
  Member& last = *members[0];
  for (int r = 1; r < 4; ++r) EXPECT_TRUE(members[size_t(r)]->stopped.load()) << members[size_t(r)]->id;
  EXPECT_EQ(last.generations, (std::vector<uint64_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(ids_of(last.ft->generation().members), "rank0");
  EXPECT_EQ(last.ft->committed_steps(), kBroken);
  EXPECT_EQ(last.applied.count(kDeaths), 1u);
  EXPECT_TRUE(contains(last.error, "step 4 failed in " + std::to_string(ft::kSameStepFailures) +
                                       " generations in a row (generations 4 to 6, each of rank0)"))
      << last.error;
}

}  // namespace
}  // namespace distcomm
