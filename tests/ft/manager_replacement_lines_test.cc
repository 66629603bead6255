// ft::Manager (manager_harness.h): what a generation short of members says while it waits for
// the launcher's replacements (ft/replacement_wait.h), and a job whose every member gave up
// forming. From an outside user's probe:
//  a. the stop line named a joiner "waiting" (what it waited for at its last look) that the
//     same line said was not replaced (read now: it had died since, with no successor);
//  b. "1 joiner(s) came ...; forming generation 3 with them" where generation 3 took in two
//     (the count was the look that ended the wait; the forming takes in every joiner then);
//  c. every member gave up forming a generation, and nobody said the job had stopped: each
//     launcher replaced its ranks into a job nobody could take them into.
// The launcher's words are written here as node 0's launcher writes them
// (launch/replacement_notice.h); the store is wrapped to see the survivor's looks.
#include "ft/member_record.h"
#include "tests/ft/manager_harness.h"
#include "tests/testing/forwarding_store.h"

namespace distcomm {
namespace {

constexpr uint64_t kSteps = 4, kDie = 2;

// The job's store, as every Manager here reaches it: counts the survivor's looks at the
// launcher's words (each reads ft/replaced_ranks once), and can hold a look that has counted
// exactly one joiner until a second one has registered (test b).
class WatchedStore : public testing::ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  std::atomic<int> looks{0};
  std::atomic<bool> hold_at_one_joiner{false};
  std::atomic<bool> holding{false};  // a look counted one joiner and is held

  bool check(const std::vector<std::string>& keys) override {
    if (keys.size() == 1 && keys[0] == "ft/" + std::string(ft::keys::kReplacedRanks)) ++looks;
    return ForwardingStore::check(keys);
  }
  int64_t add(const std::string& key, int64_t delta) override {
    const int64_t n = ForwardingStore::add(key, delta);
    // Only a reader (delta 0: waiting_joiners) that counted one joiner, once: the second one
    // registers before this reader reads the first one's id, so the look that ends the wait
    // sees one joiner and the forming after it two.
    if (key == "ft/" + std::string(ft::keys::kJoiners) && delta == 0 && n == 1 && hold_at_one_joiner.exchange(false)) {
      const std::string second = "ft/" + ft::keys::joiner(2), first = "ft/" + ft::keys::joiner(1);
      holding = true;
      EXPECT_TRUE(eventually([&] { return inner().check({first, second}); })) << "the second joiner never registered";
    }
    return n;
  }
};

class FtManagerReplacementLines : public FtManager {
 protected:
  ft::ManagerOptions watched(ft::ManagerOptions o) const {
    StorePtr store = watched_;
    o.connect = [store] { return store; };
    return o;
  }
  // What node 0's launcher writes: which ranks it replaces, and, when one's process ended,
  // its successor ("due") or none.
  void replaced_ranks(const std::string& ranks) { ft_keys_.set(ft::keys::kReplacedRanks, ranks); }
  void due(const std::string& ended, const std::string& next, milliseconds in) {
    const auto at = std::chrono::system_clock::now() + in;
    const long long ms = std::chrono::duration_cast<milliseconds>(at.time_since_epoch()).count();
    ft_keys_.set(ft::keys::successor(ended), "due|" + next + "|" + std::to_string(ms));
  }
  void none(const std::string& ended, const std::string& why) {
    ft_keys_.set(ft::keys::successor(ended), "none|" + why);
  }
  // Members rank0..rank<n-1> over the watched store; all but rank0 stop in step kDie.
  std::vector<Member*> survivor_and_victims(int n, int min_members) {
    return first_members(n, min_members, [this](ft::ManagerOptions& o) { o = watched(o); });
  }
  static Script victims_stop() {
    Script script;
    script.die_at = [](Member& m, uint64_t s, const ProcessGroupPtr&) { return m.id != "rank0" && s == kDie; };
    return script;
  }

  std::shared_ptr<WatchedStore> watched_ = std::make_shared<WatchedStore>(store_);
  PrefixStore ft_keys_{ft::keys::kRoot, store_};
};

// a. min_members 3; rank1..3 die. rank1's replacement rank1+1 waits to be taken in, rank2's
// is due, rank3 has none: 1 + 1 + 1, so rank0 waits. Then rank1+1 dies, with no successor:
// rank0 stops, and its line says so from one look -- rank1+1 not replaced, and not among
// the joiners waiting.
TEST_F(FtManagerReplacementLines, TheStopLineSaysEachReplacementInOneState) {
  std::vector<Member*> members = survivor_and_victims(4, /*min_members=*/3);
  replaced_ranks("0,1,2,3");
  const Script script = victims_stop();
  std::thread trainer([&] { train_all(members, kSteps, script); });
  EXPECT_TRUE(eventually([&] { return members[1]->stopped && members[2]->stopped && members[3]->stopped; }));
  due("rank1", "rank1+1", milliseconds(0));
  due("rank2", "rank2+1", milliseconds(10000));
  none("rank3", "not replaced again: rank 3 has had 3 replacements (--max_replacements=3)");
  for (const char* id : {"rank1", "rank2", "rank3"}) mark_dead(id, "its process has exited (the test)");
  // rank0 formed generation 2 alone and waits. Only now does rank1+1 ask to join (as
  // agree_on_state registers a joiner): asked before, rank0 would have waited for it to
  // arrive at generation 2.
  EXPECT_TRUE(eventually([&] { return watched_->looks.load() >= 1; }));
  ft_keys_.set(ft::keys::member("rank1+1"), ft::MemberRecord::of_this_process("rank1+1", kSignature).encode());
  ft_keys_.set(ft::keys::joiner(ft_keys_.add(ft::keys::kJoiners, 1)), "rank1+1");
  // Two more looks begun: one whole look saw rank1+1 waiting (1 + 1 + rank2+1 coming: it waits).
  const int looked = watched_->looks.load();
  EXPECT_TRUE(eventually([&] { return watched_->looks.load() >= looked + 2; }));
  none("rank1+1", "not replaced again: rank 1 has had 1 replacement (--max_replacements=1)");
  mark_dead("rank1+1", "its process has exited (the test)");
  trainer.join();

  const std::string& error = members[0]->error;
  EXPECT_TRUE(contains(error, "only 1 member is left in generation 2 (rank0), fewer than the program's minimum of 3"))
      << error;
  EXPECT_TRUE(contains(error, "(it waited ")) << error;
  EXPECT_TRUE(contains(error, "not replaced: rank1+1: not replaced again")) << error;
  EXPECT_TRUE(contains(error, "still coming: rank2+1")) << error;
  // The look before said rank1+1 was waiting; this one does not.
  EXPECT_FALSE(contains(error, "joiners waiting (rank1+1)")) << error;
  EXPECT_FALSE(contains(error, "joiners waiting: rank1+1")) << error;
}

// b. min_members 2; rank1..3 die, their replacements due. rank1+1 asks to join, and rank0's
// look that ends its wait counts it alone; rank2+1 asks before the forming that follows,
// which takes both in. rank0 says how many came in with the generation: two.
TEST_F(FtManagerReplacementLines, TheJoinersTakenInAreCountedFromTheGenerationFormed) {
  std::vector<Member*> members = survivor_and_victims(4, /*min_members=*/2);
  replaced_ranks("0,1,2,3");
  Member& first = add_member("rank1+1", 1);
  Member& second = add_member("rank2+1", 2);
  ::testing::internal::CaptureStderr();
  const Script script = victims_stop();
  std::thread trainer([&] { train_all({members[0]}, kSteps, script); });
  std::thread victims([&] { train_all({members[1], members[2], members[3]}, kSteps, script); });
  victims.join();
  due("rank1", "rank1+1", milliseconds(0));
  due("rank2", "rank2+1", milliseconds(0));
  due("rank3", "rank3+1", milliseconds(0));
  for (const char* id : {"rank1", "rank2", "rank3"}) mark_dead(id, "its process has exited (the test)");
  // rank0 waits for them (a look that saw none waiting yet).
  const bool waited = eventually([&] { return watched_->looks.load() >= 1; });
  watched_->hold_at_one_joiner = true;
  auto join = [this](Member& m) {
    return std::thread([this, &m] {
      try {
        m.ft = std::make_unique<ft::Manager>(watched(options(m.id, -1, /*joining=*/true)));
        train(m, kSteps);
      } catch (const std::exception& e) {
        m.error = e.what();
      }
    });
  };
  std::thread first_joiner = join(first);
  // The second asks only once rank0's look has counted the first alone (and is held there).
  const bool registered = eventually([&] { return watched_->holding.load(); });
  std::thread second_joiner = join(second);
  trainer.join();
  first_joiner.join();
  second_joiner.join();
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(waited && registered) << log;

  for (Member* m : {members[0], &first, &second}) {
    EXPECT_EQ(m->error, "") << m->id;
    EXPECT_EQ(m->ft->committed_steps(), kSteps) << m->id;
  }
  EXPECT_EQ(ids_of(members[0]->ft->generation().members), "rank0,rank1+1,rank2+1");
  EXPECT_TRUE(contains(log, "ft: member 'rank0': 2 joiners (rank1+1, rank2+1) came after ")) << log;
  EXPECT_TRUE(contains(log, "; formed generation 3 (rank0, rank1+1, rank2+1) with them")) << log;
  EXPECT_FALSE(contains(log, "1 joiner")) << log;
}

// c. Every member's group creation fails (its backend has no plugin), 3 times with the same
// members: each gives up forming generation 3. The last to give up stops the job: waiting
// joiners end at once, and launchers start no replacement. Before, nothing was written.
TEST_F(FtManagerReplacementLines, EveryMemberGivingUpFormingStopsTheJob) {
  std::vector<Member*> members =
      first_members(3, 1, [](ft::ManagerOptions& o) { o.backend = "no_such_backend_for_this_test"; });
  train_all(members, kSteps);
  for (Member* m : members) {
    EXPECT_TRUE(contains(m->error, "gave up forming generation 3 (rank0, rank1, rank2) (3 times with these members)"))
        << m->id << ": " << m->error;
  }
  ASSERT_TRUE(ft_keys_.check({ft::keys::kStopped}));
  const std::string stopped = ft_keys_.get_string(ft::keys::kStopped);
  EXPECT_TRUE(contains(stopped, "ft: every member of generation 3 (rank0, rank1, rank2) gave up forming it or is gone: "
                                "nobody is left to go on. The last: ft: member 'rank"))
      << stopped;
  for (const char* id : {"rank0", "rank1", "rank2"}) {
    EXPECT_TRUE(ft_keys_.check({ft::keys::gave_up(id)})) << id;
  }
}

}  // namespace
}  // namespace distcomm
