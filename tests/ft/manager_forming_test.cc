// ft::Manager while a generation forms: members that die or are marked dead at each point of
// it (a store that hangs a member's thread at a chosen key), with manager_harness.h.
#include "tests/ft/manager_harness.h"
#include "tests/testing/forwarding_store.h"

namespace distcomm {
namespace {

// A store that hangs the thread of its member at its first call on a key holding `trap`,
// as a process that died there; released at the test's end, it throws. With `armed_by`,
// only once a key holding that was set (at its first call on a key holding `trap` after).
class TrapStore final : public testing::ForwardingStore {
 public:
  TrapStore(StorePtr inner, std::string trap, std::string armed_by = "")
      : ForwardingStore(std::move(inner)), trap_(std::move(trap)), armed_by_(std::move(armed_by)), armed_(armed_by_.empty()) {}
  using Store::set;
  void set(const std::string& key, const Bytes& value) override {
    hang_on(key);
    ForwardingStore::set(key, value);
    if (!armed_by_.empty() && key.find(armed_by_) != std::string::npos) armed_ = true;
  }
  Bytes get(const std::string& key) override {
    hang_on(key);
    return ForwardingStore::get(key);
  }
  int64_t add(const std::string& key, int64_t delta) override {
    hang_on(key);
    return ForwardingStore::add(key, delta);
  }
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    hang_on(key);
    return ForwardingStore::compare_set(key, expected, desired);
  }
  bool check(const std::vector<std::string>& keys) override {
    for (const std::string& key : keys) hang_on(key);
    return ForwardingStore::check(keys);
  }

  std::atomic<bool> hung{false};
  void release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }

 private:
  void hang_on(const std::string& key) {
    if (!armed_ || key.find(trap_) == std::string::npos) return;
    hung = true;
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return released_; });
    throw PeerFailure("TrapStore: this member is gone");
  }
  const std::string trap_;
  const std::string armed_by_;
  std::atomic<bool> armed_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false;
};

// A second failure during the recovery: rank3's thread hangs in generation 2's forming, at
// its first store call on a key holding `trap` (its monitor goes on beating, as a hung
// process's may: only its dead mark, written once it hangs, says it is gone). The others
// must form generation 3 without it, well before their timeouts (20 s).
class FtManagerForming : public FtManager {
 protected:
  // Members rank0..rank3, rank3's caller connection (not its monitor's) a TrapStore.
  std::vector<Member*> members_with_trap(const std::shared_ptr<TrapStore>& trap,
                                         const std::function<void(ft::ManagerOptions&)>& tweak = {}) {
    std::vector<Member*> out;
    for (int r = 0; r < 4; ++r) {
      Member& m = add_member("rank" + std::to_string(r), r);
      ft::ManagerOptions o = options(m.id, 4);
      if (tweak) tweak(o);
      if (r == 3) {
        auto calls = std::make_shared<int>(0);
        StorePtr plain = store_;
        o.connect = [trap, plain, calls]() -> StorePtr { return (*calls)++ == 0 ? StorePtr(trap) : plain; };
      }
      m.ft = std::make_unique<ft::Manager>(o);
      out.push_back(&m);
    }
    return out;
  }

  // Every member fails step `fails` once, so generation 2 forms; rank3 hangs in it at its
  // trap and is marked dead once it hangs, the others waiting for that mark before they
  // fail. Returns how long the survivors took from the mark to finish `steps` (negative
  // when they did not within eventually()'s limit).
  double fail_a_step_while_rank3_hangs(const std::vector<Member*>& members, const std::shared_ptr<TrapStore>& trap,
                                       uint64_t steps, uint64_t fails) {
    std::atomic<bool> marked{false};
    Script script;
    script.after_op = [&](Member& m, uint64_t s) {
      if (s != fails || m.redone != 0) return;
      if (m.id != "rank3") {
        EXPECT_TRUE(eventually([&] { return marked.load(); }));
      }
      m.ft->step_failed("injected by the test");
    };
    const std::vector<Member*> survivors = {members[0], members[1], members[2]};
    std::thread trainer([&] { train_all(members, steps, script); });
    EXPECT_TRUE(eventually([&] { return trap->hung.load(); }));
    mark_dead("rank3", "killed by the test");
    marked = true;
    const auto t0 = Clock::now();
    const bool done = eventually([&] { return all_finished(survivors); });
    const double took = std::chrono::duration<double>(Clock::now() - t0).count();
    trap->release();
    trainer.join();
    return done ? took : -1;
  }
};

// j. rank3 hangs before it arrives at generation 2's group (generation 2 agreed, its group
// never stands): the creation is given up, and generation 3 is formed without rank3.
TEST_F(FtManagerForming, AMemberThatDiesWhileTheGroupIsCreatedIsLeftOut) {
  constexpr uint64_t kSteps = 5, kFails = 2;
  auto trap = std::make_shared<TrapStore>(store_, ft::keys::group_prefix(2) + "/");
  std::vector<Member*> members = members_with_trap(trap);
  std::atomic<bool> failed_once{false};
  Script script;
  script.after_op = [&](Member& m, uint64_t s) {  // generation 2 is formed after this
    if (m.id == "rank1" && s == kFails && !failed_once.exchange(true)) m.ft->step_failed("injected by the test");
  };
  std::vector<Member*> survivors = {members[0], members[1], members[2]};
  std::thread trainer([&] { train_all(members, kSteps, script); });
  EXPECT_TRUE(eventually([&] { return trap->hung.load(); }));
  const auto hung = Clock::now();
  mark_dead("rank3", "killed by the test");
  const bool done = eventually([&] { return all_finished(survivors); });
  const double recovery_s = std::chrono::duration<double>(Clock::now() - hung).count();
  trap->release();
  trainer.join();
  EXPECT_TRUE(done);
  EXPECT_LT(recovery_s, 10.0);
  expect_consistent(survivors, kSteps, [](uint64_t s) { return s < kFails ? all_of(4) : std::vector<int>{0, 1, 2}; });
  for (Member* m : survivors) {
    EXPECT_EQ(m->redone, 1) << m->id;
    EXPECT_EQ(ids_of(m->ft->generation().members), "rank0,rank1,rank2") << m->id;
    EXPECT_GE(m->ft->generation().number, 3u) << m->id;
  }
}

// k. A joiner asks during step 2; rank3 hangs in generation 2 after its group stands, before
// the state is broadcast to the joiner. The monitors abort that broadcast (rank3's dead
// mark), and generation 3 takes the joiner in without rank3, the state broadcast again.
TEST_F(FtManagerForming, AMemberThatDiesBeforeTheStateBroadcastIsLeftOut) {
  constexpr uint64_t kSteps = 5, kAsks = 2;
  // The check of who needs the state comes after the group's creation, before the broadcast.
  auto trap = std::make_shared<TrapStore>(store_, ft::keys::gen(2) + "needs_state/");
  std::vector<Member*> members = members_with_trap(trap);
  Member& joiner = add_member("joiner-x", 9);
  float* garbage = joiner.state.data_as<float>();
  for (int64_t e = 0; e < kElements; ++e) garbage[e] = 777.25f;
  std::atomic<int> at_ask{0};
  std::atomic<bool> refused{false};
  PrefixStore ft_keys(ft::keys::kRoot, store_);
  Script script;
  script.die_at = [&](Member&, uint64_t s, const ProcessGroupPtr&) {
    if (s == kAsks) {
      ++at_ask;
      // Until the joiner is counted in (its first begin_step), so that this step's verdict
      // takes it in (as manager_test's joiner test waits).
      EXPECT_TRUE(eventually([&] { return refused.load() || ft_keys.check({ft::keys::joiner(1)}); }));
    }
    return false;
  };
  std::thread trainer([&] { train_all(members, kSteps, script); });
  EXPECT_TRUE(eventually([&] { return at_ask.load() == 4; }));
  std::thread joining([&] {
    try {
      joiner.ft = std::make_unique<ft::Manager>(options(joiner.id, -1, /*joining=*/true));
    } catch (const std::exception& e) {
      joiner.error = e.what();
      joiner.finished = true;
      refused = true;
      return;
    }
    train(joiner, kSteps);
  });
  EXPECT_TRUE(eventually([&] { return trap->hung.load(); }));
  const auto hung = Clock::now();
  mark_dead("rank3", "killed by the test");
  std::vector<Member*> survivors = {members[0], members[1], members[2], &joiner};
  const bool done = eventually([&] { return all_finished(survivors); });
  const double recovery_s = std::chrono::duration<double>(Clock::now() - hung).count();
  trap->release();
  trainer.join();
  joining.join();
  EXPECT_TRUE(done);
  EXPECT_LT(recovery_s, 10.0) << "the broadcast waited for the dead member until its timeout";
  ASSERT_EQ(joiner.error, "");
  expect_consistent(survivors, kSteps,
                    [](uint64_t s) { return s <= kAsks ? all_of(4) : std::vector<int>{0, 1, 2, 9}; });
  EXPECT_EQ(ids_of(joiner.ft->generation().members), "rank0,rank1,rank2,joiner-x");
  EXPECT_EQ(joiner.generation_starts, (std::vector<uint64_t>{kAsks + 1}));
}

// q. A member found dead after it arrived at a generation, before the membership is
// written, is left out of that generation. Every member says step 2 failed, so generation 2
// is formed; rank3 comes first, arrives, and its thread hangs at its next store call (its
// monitor beats on); its dead mark is written then, and only then do the others come. They
// see rank3 arrived, and dead: generation 2 is rank0..rank2 (not rank0..rank3, whose group
// would then fail and a generation 3 leave rank3 out).
TEST_F(FtManagerForming, AMemberMarkedDeadAfterItArrivedIsLeftOutOfThatGeneration) {
  constexpr uint64_t kSteps = 5, kFails = 2;
  // From its arrival at generation 2 (its id written) on, rank3's every store call hangs.
  auto trap = std::make_shared<TrapStore>(store_, "", /*armed_by=*/ft::keys::gen(2) + "arrival/");
  std::vector<Member*> members = members_with_trap(trap);
  std::vector<Member*> survivors = {members[0], members[1], members[2]};
  EXPECT_GE(fail_a_step_while_rank3_hangs(members, trap, kSteps, kFails), 0.0) << "the survivors did not finish";

  PrefixStore ft_keys(ft::keys::kRoot, store_);
  EXPECT_EQ(ft_keys.get_string(ft::keys::members(2)), std::to_string(kFails) + "|rank0,rank1,rank2");
  expect_consistent(survivors, kSteps, [](uint64_t s) { return s < kFails ? all_of(4) : std::vector<int>{0, 1, 2}; });
  for (Member* m : survivors) {
    EXPECT_EQ(m->redone, 1) << m->id;
    EXPECT_EQ(m->generations, (std::vector<uint64_t>{1, 2})) << m->id;
    EXPECT_EQ(ids_of(m->ft->generation().members), "rank0,rank1,rank2") << m->id;
  }
}

// r. rank3 dies between counting its arrival at generation 2 and writing its id: the
// arrivals after its number are still read, and the survivors form generation 2 at once.
TEST_F(FtManagerForming, AnArrivalCountedButNeverWrittenDoesNotHideTheLaterOnes) {
  constexpr uint64_t kSteps = 5, kFails = 2;
  auto trap = std::make_shared<TrapStore>(store_, ft::keys::gen(2) + "arrival/");
  std::vector<Member*> members =
      members_with_trap(trap, [](ft::ManagerOptions& o) { o.recovery_timeout = std::chrono::seconds(3); });
  std::vector<Member*> survivors = {members[0], members[1], members[2]};
  const double took = fail_a_step_while_rank3_hangs(members, trap, kSteps, kFails);
  EXPECT_GE(took, 0.0) << "the survivors did not finish";
  EXPECT_LT(took, 2.0);
  expect_consistent(survivors, kSteps, [](uint64_t s) { return s < kFails ? all_of(4) : std::vector<int>{0, 1, 2}; });
}

// The members wait at step `at` until the joiner is counted in (its first begin_step) or has
// failed, so that it is taken in by then.
Script wait_for_joiner_at(uint64_t at, Store& ft_keys, const std::atomic<bool>& failed) {
  Script script;
  script.die_at = [at, &ft_keys, &failed](Member&, uint64_t s, const ProcessGroupPtr&) {
    if (s == at) {
      EXPECT_TRUE(eventually([&] { return failed.load() || ft_keys.check({ft::keys::joiner(1)}); }));
    }
    return false;
  };
  return script;
}

// A joiner's thread: makes its Manager with `o`, then trains; what its constructor throws is
// its error, and `failed`.
std::thread start_joiner(Member& m, ft::ManagerOptions o, uint64_t steps, std::atomic<bool>& failed) {
  return std::thread([&m, o, steps, &failed] {
    try {
      m.ft = std::make_unique<ft::Manager>(o);
    } catch (const std::exception& e) {
      m.error = e.what();
      failed = true;
      return;
    }
    train(m, steps);
  });
}

// s. rank3 dies before its Manager starts (its process killed at once): it leaves no record
// and no heartbeat, so the first generation cannot tell it from a rank that starts late and
// would wait for it until op_timeout; its replacement (the launcher's id "rank3+1", started
// once rank3's process ended) waits for that first generation in its constructor. The
// replacement must say rank3 is gone: the first generation forms without it at once, and
// the replacement is taken in at a step boundary, by step 2's (B7: the job sat silent until
// op_timeout).
TEST_F(FtManagerForming, AFirstMemberThatDiesBeforeItsManagerStartsIsReplaced) {
  constexpr uint64_t kSteps = 5, kAsks = 2;
  // Short, so that a hang fails the test in seconds; far above what forming takes.
  constexpr milliseconds kOpTimeout{6000};
  std::vector<Member*> members = first_members(3, 1, [&](ft::ManagerOptions& o) {
    o.initial_members = 4;
    o.op_timeout = kOpTimeout;
  });
  Member& replacement = add_member("rank3+1", 7);
  float* garbage = replacement.state.data_as<float>();
  for (int64_t e = 0; e < kElements; ++e) garbage[e] = -99.5f;
  std::atomic<bool> failed{false};
  PrefixStore ft_keys(ft::keys::kRoot, store_);
  const Script script = wait_for_joiner_at(kAsks, ft_keys, failed);  // it may be taken in before
  const auto start = Clock::now();
  std::thread trainer([&] { train_all(members, kSteps, script); });
  // The members are forming the first generation, waiting for rank3, when it is replaced.
  EXPECT_TRUE(eventually([&] { return ft_keys.add(ft::keys::arrivals(1), 0) == 3; }));
  ft::ManagerOptions o = options(replacement.id, -1, /*joining=*/true);
  o.op_timeout = kOpTimeout;
  std::thread joining = start_joiner(replacement, o, kSteps, failed);
  trainer.join();
  joining.join();
  const double took_s = std::chrono::duration<double>(Clock::now() - start).count();

  ASSERT_EQ(replacement.error, "");
  EXPECT_LT(took_s, 4.0) << "the first generation waited for rank3";
  EXPECT_EQ(ft_keys.get_string(ft::keys::members(1)), "0|rank0,rank1,rank2");
  ASSERT_TRUE(ft_keys.check({ft::keys::dead("rank3")}));
  EXPECT_TRUE(contains(ft_keys.get_string(ft::keys::dead("rank3")), "rank3+1 was started to replace it"))
      << ft_keys.get_string(ft::keys::dead("rank3"));
  std::vector<Member*> everyone = {members[0], members[1], members[2], &replacement};
  ASSERT_EQ(replacement.generation_starts.size(), 1u);
  const uint64_t joined = replacement.generation_starts.front();
  EXPECT_GE(joined, 1u);
  EXPECT_LE(joined, kAsks + 1);
  expect_consistent(everyone, kSteps, [&](uint64_t s) { return s < joined ? all_of(3) : std::vector<int>{0, 1, 2, 7}; });
  for (Member* m : members) {
    EXPECT_EQ(m->redone, 0) << m->id;
    EXPECT_EQ(m->generations, (std::vector<uint64_t>{1, 2})) << m->id;
  }
  EXPECT_EQ(ids_of(replacement.ft->generation().members), "rank0,rank1,rank2,rank3+1");
}

// t. The same id while rank3 lives: a process that only calls itself rank3's replacement
// does not make a running rank3 gone (its record names a live process on this host).
TEST_F(FtManagerForming, AReplacementIdDoesNotMakeALiveMemberGone) {
  constexpr uint64_t kSteps = 5, kAsks = 2;
  std::vector<Member*> members = first_members(4);
  Member& joiner = add_member("rank3+1", 7);
  std::atomic<bool> failed{false};
  PrefixStore ft_keys(ft::keys::kRoot, store_);
  const Script script = wait_for_joiner_at(kAsks, ft_keys, failed);
  std::thread trainer([&] { train_all(members, kSteps, script); });
  std::thread joining = start_joiner(joiner, options(joiner.id, -1, /*joining=*/true), kSteps, failed);
  trainer.join();
  joining.join();
  ASSERT_EQ(joiner.error, "");
  EXPECT_FALSE(ft_keys.check({ft::keys::dead("rank3")})) << ft_keys.get_string(ft::keys::dead("rank3"));
  for (Member* m : members) EXPECT_EQ(m->redone, 0) << m->id;
  EXPECT_EQ(ids_of(joiner.ft->generation().members), "rank0,rank1,rank2,rank3,rank3+1");
}

// u. A first generation missing a member (its launcher never started) waits up to op_timeout
// (30 minutes by default), and used to wait in silence; it says whom it waits for and when it
// gives up every report interval, as init does (DISTCOMM_INIT_REPORT_SECONDS, init's own).
TEST_F(FtManagerForming, AFirstGenerationMissingAMemberSaysWhomItWaitsFor) {
  ::setenv("DISTCOMM_INIT_REPORT_SECONDS", "0.2", 1);
  Member& m = add_member("rank0", 0);
  ft::ManagerOptions o = options(m.id, 2);  // rank1 never comes
  o.op_timeout = milliseconds(1500);        // the first generation's bound
  m.ft = std::make_unique<ft::Manager>(o);
  ::testing::internal::CaptureStderr();
  std::string error = "begin_step formed a generation without rank1";
  try {
    m.ft->begin_step({&m.state});
  } catch (const Timeout& e) {
    error = e.what();
  }
  const std::string said = ::testing::internal::GetCapturedStderr();
  ::unsetenv("DISTCOMM_INIT_REPORT_SECONDS");
  EXPECT_TRUE(contains(error, "forming generation 1 timed out waiting for rank1")) << error;
  EXPECT_TRUE(contains(said, "ft: member 'rank0': forming generation 1 has waited ")) << said;
  EXPECT_TRUE(contains(said, " for rank1 to arrive (it gives up in ")) << said;
}

// w. DISTCOMM_INIT_REPORT_SECONDS is read once, as the Manager is made (api/init.h, read in
// api/group/environment.cc like every variable of the core): a malformed value is refused
// there, naming it, not at a forming long into the training; a value given in the options
// leaves the variable unread.
TEST_F(FtManagerForming, AMalformedReportIntervalIsRefusedAsTheManagerIsMade) {
  ::setenv("DISTCOMM_INIT_REPORT_SECONDS", "soon", 1);
  std::string error = "the Manager was made";
  try {
    ft::Manager refused(options("rank0", 1));
  } catch (const InvalidArgument& e) {
    error = e.what();
  }
  ft::ManagerOptions given = options("rank0", 1);
  given.report_interval = milliseconds(200);
  std::string unread;
  try {
    ft::Manager made(given);
  } catch (const Error& e) {
    unread = e.what();
  }
  ::unsetenv("DISTCOMM_INIT_REPORT_SECONDS");
  EXPECT_TRUE(contains(error, "DISTCOMM_INIT_REPORT_SECONDS='soon' is not a positive number of seconds")) << error;
  EXPECT_EQ(unread, "");
}

// v. A joiner waiting to be taken in (its recovery timeout: 60 s by default) used to wait in
// silence; it says whom it waits for and when it gives up every report interval, as a forming
// does. Here the one member never ends a step, so the joiner waits until its deadline.
TEST_F(FtManagerForming, AJoinerWaitingToBeTakenInSaysWhomItWaitsFor) {
  Member& m = add_member("rank0", 0);
  m.ft = std::make_unique<ft::Manager>(options(m.id, 1));
  ASSERT_NE(m.ft->begin_step({&m.state}), nullptr);  // generation 1, whose step never ends
  Member& j = add_member("joiner-a", 1);
  ft::ManagerOptions o = options(j.id, -1, /*joining=*/true);
  o.recovery_timeout = milliseconds(1500);  // how long it waits to be taken in
  o.report_interval = milliseconds(200);
  j.ft = std::make_unique<ft::Manager>(o);
  ::testing::internal::CaptureStderr();
  std::string error = "the joiner was taken in by a member that ends no step";
  try {
    j.ft->begin_step({&j.state});
  } catch (const Timeout& e) {
    error = e.what();
  }
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(contains(error, "joiner-a: waited to join, and generation 2 was not formed in time")) << error;
  EXPECT_TRUE(contains(said, "ft: joiner 'joiner-a' has waited ")) << said;
  EXPECT_TRUE(contains(said, " to be taken in by generation 2, for rank0 to arrive (generation 1's members, who take "
                             "waiting joiners in at the end of a step) (it gives up in "))
      << said;
}

}  // namespace
}  // namespace distcomm
