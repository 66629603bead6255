// ft::Manager (manager_harness.h): a joiner waiting to be taken in when the job stops for a
// reason other than a step that keeps failing -- fewer than min_members left -- must learn
// it at once, with the reason; one that waits while members give up forming on their own
// clocks is not told the job stopped (it may not have). Nothing wrote ft/stopped on those paths, so it waited out its own
// recovery timeout (20 s here) and ended with a Timeout that said nothing of the job.
#include "tests/ft/manager_harness.h"

namespace distcomm {
namespace {

constexpr uint64_t kSteps = 3, kHang = 1;

// How long after the members ended the joiner may take: it polls the store every 2 ms.
constexpr double kAtOnceS = 5.0;

// rank2 stops calling its Manager in step kHang of generation 1; its Manager beats on, so
// it is alive to the others but never comes to the next generation. The step is aborted
// for the others (as a member whose op failed would do), so that they form generation 2.
Script hang_rank2(PrefixStore& ft_keys, std::atomic<bool>& hung) {
  Script script;
  script.die_at = [&ft_keys, &hung](Member& m, uint64_t s, const ProcessGroupPtr&) {
    if (m.id != "rank2" || s != kHang) return false;
    ft_keys.compare_set(ft::keys::verdict(1, kHang), {}, to_bytes("abort|rank2: stopped by the test"));
    hung = true;
    return true;
  };
  return script;
}

// Runs joiner.ft's training on a thread; `ended` is set when it returned.
std::thread start_joiner(Member& joiner, ft::ManagerOptions options, Clock::time_point* ended) {
  return std::thread([&joiner, options, ended] {
    try {
      joiner.ft = std::make_unique<ft::Manager>(options);
      train(joiner, kSteps);
    } catch (const std::exception& e) {
      joiner.error = e.what();
    }
    *ended = Clock::now();
  });
}

// a. The members' recovery timeout (2 s) passes while they wait for rank2 to form
// generation 2. That is each member's own clock (others, with later deadlines, might still
// form it), so it writes no stop mark: a mark would turn away every later joiner of a job
// that went on (helper-192's review of the first version, which wrote one). The joiner
// then ends at its own recovery timeout, as any joiner of a generation that never forms.
TEST_F(FtManager, MembersGivingUpFormingOnTheirOwnClocksWriteNoStopMark) {
  std::vector<Member*> members =
      first_members(3, 1, [](ft::ManagerOptions& o) { o.recovery_timeout = milliseconds(2000); });
  Member& joiner = add_member("joiner-t", 7);
  PrefixStore ft_keys(ft::keys::kRoot, store_);
  std::atomic<bool> hung{false};
  const Script script = hang_rank2(ft_keys, hung);
  std::thread trainer([&] { train_all(members, kSteps, script); });
  ASSERT_TRUE(eventually([&] { return hung.load(); }));
  Clock::time_point ended{};
  ft::ManagerOptions joining = options(joiner.id, -1, /*joining=*/true);
  joining.recovery_timeout = milliseconds(3000);
  std::thread joiner_thread = start_joiner(joiner, joining, &ended);
  trainer.join();
  joiner_thread.join();

  for (Member* m : members) {
    if (m->id == "rank2") continue;
    EXPECT_TRUE(contains(m->error, "forming generation 2 timed out waiting for") && contains(m->error, "rank2"))
        << m->id << ": " << m->error;
  }
  EXPECT_FALSE(ft_keys.check({ft::keys::kStopped}));
  EXPECT_FALSE(contains(joiner.error, "the job it waited to join stopped")) << joiner.error;
}

// b. min_members is 3. The joiner asks in while rank0 and rank1 form generation 2 (after
// they read the waiting joiners, so they do not expect it), and rank2 is then found gone:
// generation 2 is rank0 and rank1, too few, and every member stops. The joiner, formed out
// of generation 2, waits for generation 3, which never comes.
TEST_F(FtManager, AJoinerWaitingWhenTooFewMembersAreLeftLearnsItAtOnce) {
  std::vector<Member*> members = first_members(3, /*min_members=*/3);
  Member& joiner = add_member("joiner-m", 7);
  PrefixStore ft_keys(ft::keys::kRoot, store_);
  std::atomic<bool> hung{false};
  const Script script = hang_rank2(ft_keys, hung);
  std::thread trainer([&] { train_all(members, kSteps, script); });
  ASSERT_TRUE(eventually([&] { return hung.load() && ft_keys.add(ft::keys::arrivals(2), 0) >= 2; }));
  // Each arrives before it reads the waiting joiners: give both time to have read them.
  std::this_thread::sleep_for(milliseconds(300));
  Clock::time_point ended{};
  std::thread joining = start_joiner(joiner, options(joiner.id, -1, /*joining=*/true), &ended);
  EXPECT_TRUE(eventually([&] { return ft_keys.add(ft::keys::arrivals(2), 0) >= 3; }));
  mark_dead("rank2", "its process has exited (the test)");
  trainer.join();
  const Clock::time_point members_ended = Clock::now();
  joining.join();

  for (Member* m : members) {
    if (m->id == "rank2") continue;
    EXPECT_TRUE(contains(m->error, "only 2 members are left in generation 2 (rank0, rank1)"))
        << m->id << ": " << m->error;
  }
  const double after_s = std::chrono::duration<double>(ended - members_ended).count();
  EXPECT_LT(after_s, kAtOnceS) << "the joiner waited " << after_s << " s after the job stopped: " << joiner.error;
  EXPECT_TRUE(contains(joiner.error, "joiner 'joiner-m' was not taken in: the job it waited to join stopped"))
      << joiner.error;
  EXPECT_TRUE(contains(joiner.error, "fewer than the program's minimum of 3")) << joiner.error;
}

}  // namespace
}  // namespace distcomm
