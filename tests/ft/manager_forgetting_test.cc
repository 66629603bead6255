// The keys of old steps and generations are deleted (ft/forgetting.h): the job's store, which
// its launcher serves, holds as many keys after 400 steps as after 50, and an old
// generation's keys (but its members record) are gone once the next one has run a step.
// Without the deletion every step left gen/<g>/step/<s>/{done,verdict} for good (~300
// bytes a step in the launcher).
#include "tests/ft/manager_harness.h"

namespace distcomm {
namespace {

TEST_F(FtManager, AJobsStoreHoldsNoMoreKeysAfterManyStepsThanAfterAFew) {
  std::vector<Member*> members = first_members(3);
  train_all(members, 50);
  const int64_t after_few = store_->num_keys();
  train_all(members, 400);
  const int64_t after_many = store_->num_keys();
  expect_consistent(members, 400, [](uint64_t) { return all_of(3); });
  // The last two steps' keys stay (manager.cc, Manager::forget): the same count at both points.
  EXPECT_LE(after_many, after_few) << "keys after 50 steps: " << after_few << ", after 400: " << after_many;
  PrefixStore ft(ft::keys::kRoot, store_);
  for (uint64_t s : {0, 10, 48, 100, 397}) {
    EXPECT_FALSE(ft.check({ft::keys::done(1, s)})) << "step " << s;
    EXPECT_FALSE(ft.check({ft::keys::verdict(1, s)})) << "step " << s;
  }
  EXPECT_TRUE(ft.check({ft::keys::verdict(1, 399)}));  // the last step's verdict
}

// rank2 stops in step 4 and rank3 in step 10, each marked dead (as manager_test's b.):
// generations 2 and 3 form without them. Once generation 3 has committed a step, generation
// 1's keys are gone but its members record; generation 2's stay (the last one before), and
// each generation's steps are deleted as generation 1's were.
TEST_F(FtManager, AnOldGenerationsKeysAreGoneOnceTwoLaterOnesHaveRunAStep) {
  constexpr uint64_t kSteps = 40, kFirstDeath = 4, kSecondDeath = 10;
  std::vector<Member*> members = first_members(4);
  Script script;
  script.die_at = [](Member& m, uint64_t s, const ProcessGroupPtr& pg) {
    if (!(m.id == "rank2" && s == kFirstDeath) && !(m.id == "rank3" && s == kSecondDeath)) return false;
    m.held = pg;
    return true;
  };
  std::thread trainer([&] { train_all(members, kSteps, script); });
  for (int k : {2, 3}) {
    EXPECT_TRUE(eventually([&] { return members[size_t(k)]->stopped.load(); }));
    std::this_thread::sleep_for(milliseconds(100));
    mark_dead("rank" + std::to_string(k), "killed by the test");
  }
  trainer.join();
  std::vector<Member*> survivors = {members[0], members[1]};
  expect_consistent(survivors, kSteps, [](uint64_t s) {
    return s < kFirstDeath ? all_of(4) : s < kSecondDeath ? std::vector<int>{0, 1, 3} : std::vector<int>{0, 1};
  });
  for (Member* m : survivors) EXPECT_EQ(m->generations, (std::vector<uint64_t>{1, 2, 3})) << m->id;

  PrefixStore ft(ft::keys::kRoot, store_);
  for (uint64_t g : {1, 2, 3}) EXPECT_TRUE(ft.check({ft::keys::members(g)})) << g;
  EXPECT_EQ(ft.get_string(ft::keys::kForgottenBelow), "2");
  for (uint64_t s = 0; s <= kFirstDeath; ++s) {
    EXPECT_FALSE(ft.check({ft::keys::done(1, s)})) << "generation 1, step " << s;
    EXPECT_FALSE(ft.check({ft::keys::verdict(1, s)})) << "generation 1, step " << s;
  }
  EXPECT_FALSE(ft.check({ft::keys::arrivals(1)}));
  for (int64_t n = 1; n <= 4; ++n) EXPECT_FALSE(ft.check({ft::keys::arrival(1, n)})) << n;
  // Generation 2's: its steps but the last three, as a live generation's; its abort kept.
  for (uint64_t s = kFirstDeath; s + 2 < kSecondDeath; ++s) {
    EXPECT_FALSE(ft.check({ft::keys::verdict(2, s)})) << "generation 2, step " << s;
  }
  EXPECT_TRUE(ft.check({ft::keys::arrivals(2)}));
  ASSERT_TRUE(ft.check({ft::keys::verdict(2, kSecondDeath)}));
  EXPECT_EQ(ft.get_string(ft::keys::verdict(2, kSecondDeath)).rfind("abort|", 0), 0u);
  for (uint64_t s = kSecondDeath; s + 2 < kSteps; ++s) {
    EXPECT_FALSE(ft.check({ft::keys::verdict(3, s)})) << "generation 3, step " << s;
  }
}

}  // namespace
}  // namespace distcomm
