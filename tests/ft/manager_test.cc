// ft::Manager with its members as threads (manager_harness.h): steps, deaths, joiners,
// refusals, the minimum, commit's time limit.
#include "tests/ft/manager_harness.h"

namespace distcomm {
namespace {

// a. Nobody fails: one generation, every step committed once by every member.
TEST_F(FtManager, WithoutFailuresEveryStepCommitsOnce) {
  constexpr uint64_t kSteps = 10;
  std::vector<Member*> members = first_members(4);
  train_all(members, kSteps);
  expect_consistent(members, kSteps, [](uint64_t) { return all_of(4); });
  for (Member* m : members) {
    EXPECT_EQ(m->redone, 0) << m->id;
    EXPECT_EQ(m->applied.size(), kSteps) << m->id;
    EXPECT_EQ(m->generations, (std::vector<uint64_t>{1})) << m->id;
    EXPECT_EQ(ids_of(m->ft->generation().members), "rank0,rank1,rank2,rank3");
    EXPECT_TRUE(m->ft->failures().empty()) << m->id;
  }
}

// b. rank2 stops in the middle of step 4 (its group alive, as a hung process's); the
// others wait for it in the all_reduce until its dead mark is written. Their monitors then
// abort the step's group, commit says "redo" once, and the survivors form generation 2
// without it and redo step 4 there.
TEST_F(FtManager, AMemberMarkedDeadMidStepIsLeftOutAndTheStepRedone) {
  constexpr uint64_t kSteps = 8, kDeath = 4;
  std::vector<Member*> members = first_members(4);
  Script script;
  script.die_at = [](Member& m, uint64_t s, const ProcessGroupPtr& pg) {
    if (m.id != "rank2" || s != kDeath) return false;
    m.held = pg;  // stops here; its Manager stays (the test ends it)
    return true;
  };
  std::thread trainer([&] { train_all(members, kSteps, script); });
  EXPECT_TRUE(eventually([&] { return members[2]->stopped.load(); }));
  // Let the others reach the all_reduce that waits for rank2.
  std::this_thread::sleep_for(milliseconds(100));
  const auto marked = Clock::now();
  mark_dead("rank2", "killed by the test");
  trainer.join();
  const double recovery_s = std::chrono::duration<double>(Clock::now() - marked).count();

  std::vector<Member*> survivors = {members[0], members[1], members[3]};
  expect_consistent(survivors, kSteps, [](uint64_t s) { return s < kDeath ? all_of(4) : std::vector<int>{0, 1, 3}; });
  for (Member* m : survivors) {
    EXPECT_EQ(m->redone, 1) << m->id;
    EXPECT_EQ(m->generations, (std::vector<uint64_t>{1, 2})) << m->id;
    EXPECT_EQ(m->generation_starts, (std::vector<uint64_t>{0, kDeath})) << m->id;
    EXPECT_EQ(ids_of(m->ft->generation().members), "rank0,rank1,rank3") << m->id;
    ASSERT_EQ(m->ft->failures().size(), 1u) << m->id;
    const ft::FailureEvent& f = m->ft->failures().front();
    EXPECT_EQ(f.generation, 1u);
    EXPECT_EQ(f.step, kDeath);
    // Its dead mark, as the others' monitors read it ("member rank2 is gone"), or, when
    // rank2's own monitor saw the mark first (here it runs on: its thread is not stopped) and
    // shut its group down (it is fenced), that as their all_reduce met it, in the group's ranks.
    EXPECT_TRUE(contains(f.why, "rank2") || contains(f.why, "rank 2 shut the group down")) << f.why;
    EXPECT_GE(f.recovered, f.noticed) << m->id;
  }
  // The blocked ops ended because the step was aborted, not at their 20 s timeout.
  EXPECT_LT(recovery_s, 10.0);
  // rank2 applied the steps before it died, and nothing after.
  EXPECT_EQ(members[2]->applied.size(), kDeath);
  EXPECT_EQ(members[2]->ft->committed_steps(), kDeath);
}

// c. rank2's Manager is destroyed in the middle of step 3 (its group kept: no op of it
// fails): nothing marks it dead, and every member's process is this one, so only its
// heartbeat, stopped, tells. Found after heartbeat_timeout, by rank1 (its predecessor).
TEST_F(FtManager, AMemberWhoseHeartbeatStopsIsFoundAfterTheHeartbeatTimeout) {
  constexpr uint64_t kSteps = 6, kDeath = 3;
  std::vector<Member*> members = first_members(4);
  std::atomic<int64_t> died_at_ns{0};  // system_clock, as FailureEvent's times
  Script script;
  script.die_at = [&](Member& m, uint64_t s, const ProcessGroupPtr& pg) {
    if (m.id != "rank2" || s != kDeath) return false;
    m.held = pg;
    // Before the reset, which joins the monitor (and may take a while on a loaded machine):
    // the heartbeat's last beat is no later than the reset's end, and taking the time after
    // it made the death look later than it was (the survivors then seemed to notice early).
    died_at_ns = std::chrono::system_clock::now().time_since_epoch().count();
    m.ft.reset();  // its monitor, and so its heartbeat, stops
    return true;
  };
  train_all(members, kSteps, script);
  const auto died = std::chrono::system_clock::time_point(std::chrono::system_clock::duration(died_at_ns.load()));

  std::vector<Member*> survivors = {members[0], members[1], members[3]};
  expect_consistent(survivors, kSteps, [](uint64_t s) { return s < kDeath ? all_of(4) : std::vector<int>{0, 1, 3}; });
  PrefixStore ft_keys(ft::keys::kRoot, store_);
  const std::string dead_mark =
      ft_keys.check({ft::keys::dead("rank2")}) ? ft_keys.get_string(ft::keys::dead("rank2")) : "(no dead mark)";
  EXPECT_TRUE(contains(dead_mark, "heartbeat")) << dead_mark;
  for (Member* m : survivors) {
    EXPECT_EQ(m->redone, 1) << m->id;
    EXPECT_EQ(ids_of(m->ft->generation().members), "rank0,rank1,rank3") << m->id;
    ASSERT_EQ(m->ft->failures().size(), 1u) << m->id;
    const ft::FailureEvent& f = m->ft->failures().front();
    EXPECT_TRUE(contains(f.why, "rank2") && contains(f.why, "heartbeat")) << f.why;
    // Not before the heartbeat timeout (nothing else could tell), and not much after.
    const double after_s = std::chrono::duration<double>(f.noticed - died).count();
    EXPECT_GE(after_s, 0.9 * std::chrono::duration<double>(kHeartbeatTimeout).count()) << m->id;
    EXPECT_LT(after_s, 10.0) << m->id;
  }
}

// d. A joiner (garbage state) asks in during step 2: step 2's verdict says "grow", and
// step 3 runs in generation 2 with it, after the state was broadcast to it. From there on
// its state is the others', bit for bit.
TEST_F(FtManager, AJoinerIsTakenInAtAStepBoundaryWithTheMembersState) {
  constexpr uint64_t kSteps = 7, kAsks = 2;
  std::vector<Member*> members = first_members(3);
  Member& joiner = add_member("joiner-a", 7);
  float* garbage = joiner.state.data_as<float>();
  for (int64_t e = 0; e < kElements; ++e) garbage[e] = -12345.5f - float(e);
  std::atomic<int> at_ask{0};
  std::atomic<bool> refused{false};
  PrefixStore ft_keys(ft::keys::kRoot, store_);
  Script script;
  script.die_at = [&](Member&, uint64_t s, const ProcessGroupPtr&) {
    if (s == kAsks) {
      ++at_ask;
      // Step 2's commit must see the joiner: the members wait here until it is counted in,
      // which it is in its first begin_step, not in its constructor (waiting for the
      // constructor let step 2 commit first, 1 run in 24 under load: taken in at step 4).
      EXPECT_TRUE(eventually([&] { return refused.load() || ft_keys.check({ft::keys::joiner(1)}); }))
          << "the joiner was never counted in";
    }
    return false;
  };
  std::thread trainer([&] { train_all(members, kSteps, script); });
  EXPECT_TRUE(eventually([&] { return at_ask.load() == 3; }));  // generation 1 stands
  std::thread joining([&] {
    try {
      joiner.ft = std::make_unique<ft::Manager>(options(joiner.id, -1, /*joining=*/true));
    } catch (const std::exception& e) {
      joiner.error = e.what();
      refused = true;
      return;
    }
    train(joiner, kSteps);
  });
  trainer.join();
  joining.join();
  ASSERT_EQ(joiner.error, "");

  std::vector<Member*> everyone = {members[0], members[1], members[2], &joiner};
  expect_consistent(everyone, kSteps,
                    [](uint64_t s) { return s <= kAsks ? all_of(3) : std::vector<int>{0, 1, 2, 7}; });
  for (Member* m : members) {
    EXPECT_EQ(m->redone, 0) << m->id;
    EXPECT_EQ(m->generations, (std::vector<uint64_t>{1, 2})) << m->id;
    EXPECT_EQ(m->generation_starts, (std::vector<uint64_t>{0, kAsks + 1})) << m->id;
  }
  EXPECT_EQ(joiner.generations, (std::vector<uint64_t>{2}));
  EXPECT_EQ(joiner.generation_starts, (std::vector<uint64_t>{kAsks + 1}));
  EXPECT_EQ(joiner.applied.size(), kSteps - kAsks - 1);
  EXPECT_EQ(ids_of(joiner.ft->generation().members), "rank0,rank1,rank2,joiner-a");
}

// e. A joiner with other state is refused by its constructor, naming both signatures; the
// members go on as if it never came.
TEST_F(FtManager, AJoinerWithOtherStateIsRefusedAndTheJobGoesOn) {
  constexpr uint64_t kSteps = 5, kAsks = 2;
  std::vector<Member*> members = first_members(3);
  std::atomic<int> at_ask{0};
  std::atomic<bool> asked{false};
  Script script;
  script.die_at = [&](Member&, uint64_t s, const ProcessGroupPtr&) {
    if (s == kAsks) {
      ++at_ask;
      EXPECT_TRUE(eventually([&] { return asked.load(); }));
    }
    return false;
  };
  std::thread trainer([&] { train_all(members, kSteps, script); });
  EXPECT_TRUE(eventually([&] { return at_ask.load() == 3; }));
  std::string refused;
  ft::ManagerOptions o = options("joiner-b", -1, /*joining=*/true);
  o.state_signature = "toy: [8] f64";
  try {
    ft::Manager joiner(o);
    refused = "not refused";
  } catch (const InvalidArgument& e) {
    refused = e.what();
  } catch (const std::exception& e) {
    refused = std::string("not InvalidArgument: ") + e.what();
  }
  asked = true;
  trainer.join();
  EXPECT_TRUE(contains(refused, "joiner-b") && contains(refused, "'toy: [8] f64'") &&
              contains(refused, std::string("'") + kSignature + "'"))
      << refused;
  expect_consistent(members, kSteps, [](uint64_t) { return all_of(3); });
  for (Member* m : members) {
    EXPECT_EQ(m->redone, 0) << m->id;
    EXPECT_EQ(m->generations, (std::vector<uint64_t>{1})) << m->id;
  }
}

// f. With min_members 4, a member's death leaves 3: every survivor stops with an Error
// naming who is left, and commits nothing more.
TEST_F(FtManager, FewerThanMinMembersStopsEverySurvivorNamingWhoIsLeft) {
  constexpr uint64_t kSteps = 6, kDeath = 2;
  std::vector<Member*> members = first_members(4, /*min_members=*/4);
  Script script;
  script.die_at = [&](Member& m, uint64_t s, const ProcessGroupPtr& pg) {
    if (m.id != "rank2" || s != kDeath) return false;
    m.held = pg;
    return true;
  };
  std::thread trainer([&] { train_all(members, kSteps, script); });
  EXPECT_TRUE(eventually([&] { return members[2]->stopped.load(); }));
  mark_dead("rank2", "killed by the test");
  trainer.join();
  for (Member* m : {members[0], members[1], members[3]}) {
    EXPECT_TRUE(contains(m->error, "only 3 members are left in generation 2 (rank0, rank1, rank3)") &&
                contains(m->error, "minimum of 4"))
        << m->id << ": " << m->error;
    EXPECT_EQ(m->ft->committed_steps(), kDeath) << m->id;
    EXPECT_EQ(m->redone, 1) << m->id;
  }
}

// g. One member says its step failed (its op went through): the step is aborted for all,
// nobody applies it, and the same members go on in a new generation and redo it.
TEST_F(FtManager, AFailedStepOnOneMemberIsRedoneByAll) {
  constexpr uint64_t kSteps = 6, kFails = 3;
  std::vector<Member*> members = first_members(3);
  std::atomic<bool> failed_once{false};
  Script script;
  script.after_op = [&](Member& m, uint64_t s) {
    if (m.id == "rank1" && s == kFails && !failed_once.exchange(true)) m.ft->step_failed("injected by the test");
  };
  train_all(members, kSteps, script);
  expect_consistent(members, kSteps, [](uint64_t) { return all_of(3); });
  for (Member* m : members) {
    EXPECT_EQ(m->redone, 1) << m->id;
    // A new generation of the same members (the Manager forms one after every abort).
    EXPECT_EQ(m->generations, (std::vector<uint64_t>{1, 2})) << m->id;
    EXPECT_EQ(m->generation_starts, (std::vector<uint64_t>{0, kFails})) << m->id;
    EXPECT_EQ(ids_of(m->ft->generation().members), "rank0,rank1,rank2") << m->id;
    ASSERT_EQ(m->ft->failures().size(), 1u) << m->id;
    EXPECT_TRUE(contains(m->ft->failures().front().why, "member 'rank1': injected by the test"))
        << m->ft->failures().front().why;
  }
}

// h. A replacement: rank2 stops in step 3, a joiner asks while the others wait for it, and
// then rank2's dead mark comes. The survivors and the joiner (taken in at once, or at the
// next step boundary) finish every step with one state.
TEST_F(FtManager, AReplacementJoinsWhenAMemberDies) {
  constexpr uint64_t kSteps = 7, kDeath = 3;
  std::vector<Member*> members = first_members(4);
  Member& joiner = add_member("joiner-r", 8);
  Script script;
  script.die_at = [](Member& m, uint64_t s, const ProcessGroupPtr& pg) {
    if (m.id != "rank2" || s != kDeath) return false;
    m.held = pg;
    return true;
  };
  std::thread trainer([&] { train_all(members, kSteps, script); });
  EXPECT_TRUE(eventually([&] { return members[2]->stopped.load(); }));
  std::thread joining([&] {
    try {
      joiner.ft = std::make_unique<ft::Manager>(options(joiner.id, -1, /*joining=*/true));
    } catch (const std::exception& e) {
      joiner.error = e.what();
      return;
    }
    train(joiner, kSteps);
  });
  std::this_thread::sleep_for(milliseconds(50));
  mark_dead("rank2", "killed by the test");
  trainer.join();
  joining.join();
  ASSERT_EQ(joiner.error, "");
  ASSERT_EQ(joiner.generation_starts.size(), 1u);
  const uint64_t joined = joiner.generation_starts.front();
  EXPECT_GE(joined, kDeath);
  std::vector<Member*> everyone = {members[0], members[1], members[3], &joiner};
  expect_consistent(everyone, kSteps, [&](uint64_t s) {
    return s < kDeath ? all_of(4) : s < joined ? std::vector<int>{0, 1, 3} : std::vector<int>{0, 1, 3, 8};
  });
  EXPECT_EQ(ids_of(joiner.ft->generation().members), "rank0,rank1,rank3,joiner-r");
  for (Member* m : {members[0], members[1], members[3]}) EXPECT_EQ(m->redone, 1) << m->id;
}

// i. A joiner with other state that starts before the job's first generation waits for it,
// then is refused: the members' state is known only once that generation stands.
TEST_F(FtManager, AnEarlyJoinerWithOtherStateIsRefusedOnceTheJobStands) {
  constexpr uint64_t kSteps = 4;
  std::string refused = "not refused";
  std::thread early([&] {
    ft::ManagerOptions o = options("joiner-e", -1, /*joining=*/true);
    o.state_signature = "toy: [8] f64";
    try {
      ft::Manager joiner(o);
    } catch (const InvalidArgument& e) {
      refused = e.what();
    } catch (const std::exception& e) {
      refused = std::string("not InvalidArgument: ") + e.what();
    }
  });
  std::this_thread::sleep_for(milliseconds(50));  // it asks before any member exists
  std::vector<Member*> members = first_members(3);
  train_all(members, kSteps);
  early.join();
  EXPECT_TRUE(contains(refused, "joiner-e") && contains(refused, "'toy: [8] f64'") &&
              contains(refused, std::string("'") + kSignature + "'"))
      << refused;
  expect_consistent(members, kSteps, [](uint64_t) { return all_of(3); });
  for (Member* m : members) EXPECT_EQ(ids_of(m->ft->generation().members), "rank0,rank1,rank2") << m->id;
}

// l. rank3 makes its Manager (and so begins to beat) 2 x heartbeat_timeout after the
// others. A member that has never beaten is not judged by its heartbeat: the first
// generation waits for it (its deadline is op_timeout), and it trains with the others from
// step 0.
TEST_F(FtManager, AFirstMemberThatStartsLateIsStillInTheFirstGeneration) {
  constexpr uint64_t kSteps = 5;
  std::vector<Member*> members = first_members(3, 1, [](ft::ManagerOptions& o) { o.initial_members = 4; });
  Member& late = add_member("rank3", 3);
  members.push_back(&late);
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  for (int r = 0; r < 3; ++r) threads.emplace_back([m = members[size_t(r)]] { train(*m, kSteps); });
  threads.emplace_back([&] {
    std::this_thread::sleep_for(2 * kHeartbeatTimeout);
    try {
      late.ft = std::make_unique<ft::Manager>(options(late.id, 4));
    } catch (const std::exception& e) {
      late.error = e.what();
      return;
    }
    train(late, kSteps);
  });
  for (auto& t : threads) t.join();
  const double took_s = std::chrono::duration<double>(Clock::now() - start).count();

  ASSERT_NE(late.ft, nullptr) << late.error;
  expect_consistent(members, kSteps, [](uint64_t) { return all_of(4); });
  for (Member* m : members) {
    EXPECT_EQ(m->redone, 0) << m->id;
    EXPECT_EQ(m->generations, (std::vector<uint64_t>{1})) << m->id;
    EXPECT_EQ(ids_of(m->ft->generation().members), "rank0,rank1,rank2,rank3") << m->id;
  }
  PrefixStore ft_keys(ft::keys::kRoot, store_);
  EXPECT_FALSE(ft_keys.check({ft::keys::dead("rank3")})) << "rank3 was taken for gone: "
                                                         << ft_keys.get_string(ft::keys::dead("rank3"));
  EXPECT_LT(took_s, 10.0);
}

// m. A joiner makes its Manager during step 2 (and beats from then on), then waits longer
// than recovery_timeout (1 s here, on every member) before its first begin_step. It is
// counted in as a joiner only then: meanwhile the members commit steps 2..7 as if it were
// not there (none of their generations waits for it), and once it comes it is taken in at
// the next step boundary with the members' state.
TEST_F(FtManager, AJoinerSlowToBeginIsTakenInWhenItComesWithoutHoldingUpTheMembers) {
  constexpr uint64_t kSteps = 12, kAsks = 2, kCounted = 8;
  constexpr milliseconds kRecovery{1000};
  auto short_recovery = [kRecovery](ft::ManagerOptions& o) { o.recovery_timeout = kRecovery; };
  std::vector<Member*> members = first_members(3, 1, short_recovery);
  Member& joiner = add_member("joiner-s", 7);
  float* garbage = joiner.state.data_as<float>();
  for (int64_t e = 0; e < kElements; ++e) garbage[e] = -9876.5f - float(e);
  std::atomic<int> at_ask{0}, at_counted{0};
  std::atomic<bool> constructed{false};
  PrefixStore ft_keys(ft::keys::kRoot, store_);
  Script script;
  script.die_at = [&](Member& m, uint64_t s, const ProcessGroupPtr&) {
    if (s == kAsks && m.redone == 0 && m.generations.size() == 1) {
      ++at_ask;
      EXPECT_TRUE(eventually([&] { return constructed.load(); })) << "the joiner never made its Manager";
    }
    if (s == kCounted && m.generations.size() == 1) {
      // The joiner is counted in once it calls begin_step: this step's verdict says "grow".
      ++at_counted;
      EXPECT_TRUE(eventually([&] { return ft_keys.check({ft::keys::joiner(1)}); }, milliseconds(10000)))
          << "the joiner was never counted in";
    }
    return false;
  };
  std::thread trainer([&] { train_all(members, kSteps, script); });
  EXPECT_TRUE(eventually([&] { return at_ask.load() == 3; }));  // generation 1 stands
  int members_at_counted = -1;  // when the joiner came to begin_step
  double waited_s = 0;
  std::thread joining([&] {
    ft::ManagerOptions o = options(joiner.id, -1, /*joining=*/true);
    o.recovery_timeout = kRecovery;
    try {
      joiner.ft = std::make_unique<ft::Manager>(o);
    } catch (const std::exception& e) {
      joiner.error = e.what();
      constructed = true;
      joiner.finished = true;
      return;
    }
    const auto made = Clock::now();
    constructed = true;
    std::this_thread::sleep_for(kRecovery + milliseconds(500));
    members_at_counted = at_counted.load();
    waited_s = std::chrono::duration<double>(Clock::now() - made).count();
    train(joiner, kSteps);
  });
  trainer.join();
  joining.join();

  EXPECT_GT(waited_s, std::chrono::duration<double>(kRecovery).count());
  // Every member went on to step 8 while the joiner had not yet come.
  EXPECT_EQ(members_at_counted, 3) << "the members stalled while the joiner was slow to come";
  ASSERT_EQ(joiner.error, "");
  std::vector<Member*> everyone = {members[0], members[1], members[2], &joiner};
  expect_consistent(everyone, kSteps,
                    [](uint64_t s) { return s <= kCounted ? all_of(3) : std::vector<int>{0, 1, 2, 7}; });
  for (Member* m : members) {
    EXPECT_EQ(m->redone, 0) << m->id;
    EXPECT_EQ(m->generations, (std::vector<uint64_t>{1, 2})) << m->id;
    EXPECT_EQ(m->generation_starts, (std::vector<uint64_t>{0, kCounted + 1})) << m->id;
  }
  EXPECT_EQ(joiner.generation_starts, (std::vector<uint64_t>{kCounted + 1}));
  EXPECT_EQ(ids_of(joiner.ft->generation().members), "rank0,rank1,rank2,joiner-s");
}

// n. A joiner with the members' state_signature but state tensors of another shape ([8]
// against the members' [4]) is refused by its begin_step, before it is counted in, with
// InvalidArgument naming both; the members go on in generation 1 as if it never came.
TEST_F(FtManager, AJoinerWhoseStateHasAnotherShapeIsRefusedNamingBothAndTheJobGoesOn) {
  constexpr uint64_t kSteps = 6, kAsks = 2;
  constexpr milliseconds kRecovery{3000};  // bounds a generation that cannot form
  std::vector<Member*> members =
      first_members(3, 1, [kRecovery](ft::ManagerOptions& o) { o.recovery_timeout = kRecovery; });
  std::atomic<int> at_ask{0};
  std::atomic<bool> asked{false};
  Script script;
  script.die_at = [&](Member& m, uint64_t s, const ProcessGroupPtr&) {
    if (s == kAsks && m.generations.size() == 1 && m.redone == 0) {
      ++at_ask;
      EXPECT_TRUE(eventually([&] { return asked.load(); }));
    }
    return false;
  };
  std::thread trainer([&] { train_all(members, kSteps, script); });
  EXPECT_TRUE(eventually([&] { return at_ask.load() == 3; }));  // generation 1 stands
  Tensor other = Tensor::zeros({2 * kElements});
  std::string refused = "not refused";
  {
    ft::ManagerOptions o = options("joiner-shape", -1, /*joining=*/true);  // the members' signature
    o.recovery_timeout = kRecovery;
    std::unique_ptr<ft::Manager> joiner;
    try {
      joiner = std::make_unique<ft::Manager>(o);
    } catch (const std::exception& e) {
      refused = std::string("refused by its constructor, not begin_step: ") + e.what();
    }
    asked = true;  // the members go on from here, whatever the joiner does
    if (joiner) {
      try {
        ProcessGroupPtr pg = joiner->begin_step({&other});
        refused = std::string("taken in: ") + (pg ? joiner->generation().describe() : "(null group)");
      } catch (const InvalidArgument& e) {
        refused = e.what();
      } catch (const std::exception& e) {
        refused = std::string("not InvalidArgument: ") + e.what();
      }
    }
  }
  trainer.join();
  const std::string mine = other.describe(), theirs = members[0]->state.describe();
  EXPECT_TRUE(contains(refused, "joiner-shape") && contains(refused, mine) && contains(refused, theirs))
      << "expected to name " << mine << " and " << theirs << ": " << refused;
  expect_consistent(members, kSteps, [](uint64_t) { return all_of(3); });
  for (Member* m : members) {
    EXPECT_EQ(m->redone, 0) << m->id;
    EXPECT_EQ(m->generations, (std::vector<uint64_t>{1})) << m->id;
    EXPECT_EQ(ids_of(m->ft->generation().members), "rank0,rank1,rank2") << m->id;
  }
}

// o. Every member calls finish() after its last commit. A joiner that starts after that is
// not taken in (nobody forms a generation any more): its begin_step returns null at once,
// not a Timeout at recovery_timeout.
TEST_F(FtManager, AJoinerAfterTheTrainingFinishedGetsANullGroupPromptly) {
  constexpr uint64_t kSteps = 3;
  constexpr milliseconds kRecovery{4000};
  std::vector<Member*> members = first_members(3);
  train_all(members, kSteps);
  for (Member* m : members) m->ft->finish();
  expect_consistent(members, kSteps, [](uint64_t) { return all_of(3); });

  Member& joiner = add_member("joiner-late", 5);
  ft::ManagerOptions o = options(joiner.id, -1, /*joining=*/true);
  o.recovery_timeout = kRecovery;
  std::string outcome = "null group";
  const auto start = Clock::now();
  try {
    joiner.ft = std::make_unique<ft::Manager>(o);
    if (ProcessGroupPtr pg = joiner.ft->begin_step({&joiner.state})) outcome = "a group of " + std::to_string(pg->size());
    if (ProcessGroupPtr pg = joiner.ft->begin_step({&joiner.state})) outcome = "a group the second time";
  } catch (const std::exception& e) {
    outcome = std::string("threw: ") + e.what();
  }
  const double took_s = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(outcome, "null group");
  EXPECT_LT(took_s, 1.0) << "recovery_timeout is " << kRecovery.count() << " ms";
  if (joiner.ft) {
    EXPECT_EQ(joiner.ft->committed_steps(), 0u);
  }
}

// p. commit()'s time limit: with op_timeout 600 ms, rank1 finishes step 2's op and then
// does not commit (its thread stops there; its monitor beats on). rank0's commit() waits
// op_timeout for it, writes the step's verdict "abort|member 'rank0' waited ..." and returns false
// (no Timeout thrown); rank1, come back, reads that abort, and both redo step 2.
TEST_F(FtManager, CommitsTimeLimitAbortsTheStepForEveryMember) {
  constexpr uint64_t kSteps = 5, kHang = 2;
  constexpr milliseconds kOpTimeout{600};
  std::vector<Member*> members = first_members(2, 1, [kOpTimeout](ft::ManagerOptions& o) {
    o.op_timeout = kOpTimeout;
    o.recovery_timeout = std::chrono::seconds(2);  // bounds a generation that cannot form
  });
  PrefixStore ft_keys(ft::keys::kRoot, store_);
  const std::string verdict_key = ft::keys::verdict(1, kHang);
  Script script;
  script.after_op = [&](Member& m, uint64_t s) {
    if (m.id != "rank1" || s != kHang || m.redone != 0) return;
    // Back only once the step has a verdict: rank0's, at its commit's time limit.
    EXPECT_TRUE(eventually([&] { return ft_keys.check({verdict_key}); }, milliseconds(3000)))
        << "rank0's commit wrote no verdict";
  };
  const auto start = Clock::now();
  train_all(members, kSteps, script);
  const double took_s = std::chrono::duration<double>(Clock::now() - start).count();

  const std::string verdict = ft_keys.check({verdict_key}) ? ft_keys.get_string(verdict_key) : "(none)";
  const std::string expected = "abort|member 'rank0' waited " + std::to_string(kOpTimeout.count()) + " ms";
  EXPECT_EQ(verdict.rfind(expected, 0), 0u) << verdict;
  expect_consistent(members, kSteps, [](uint64_t) { return all_of(2); });
  for (Member* m : members) {
    EXPECT_EQ(m->redone, 1) << m->id;
    EXPECT_EQ(m->generations, (std::vector<uint64_t>{1, 2})) << m->id;
    EXPECT_EQ(m->generation_starts, (std::vector<uint64_t>{0, kHang})) << m->id;
    ASSERT_EQ(m->ft->failures().size(), 1u) << m->id;
    EXPECT_TRUE(contains(m->ft->failures().front().why, "member 'rank0' waited")) << m->ft->failures().front().why;
  }
  EXPECT_LT(took_s, 5.0);
}

// A process started again under the id of a member its group took for gone (a second
// launcher for the same node, say) was told the id "is taken (by pid N)", of a pid long dead.
TEST_F(FtManager, AnIdOfAMemberTakenForGoneIsRefusedSayingSo) {
  // Member rank7's record, as another process (pid 4242) wrote it.
  ft::MemberRecord other = ft::MemberRecord::of_this_process("rank7", kSignature);
  other.pid = 4242;
  PrefixStore ft_keys(ft::keys::kRoot, store_);
  ft_keys.set(ft::keys::member("rank7"), other.encode());
  const auto refusal = [&] {
    try {
      ft::Manager again(options("rank7", 1));
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("not refused");
  };
  const std::string taken = refusal();
  EXPECT_TRUE(contains(taken, "member id 'rank7' is taken (by pid 4242)")) << taken;
  ft_keys.set(ft::keys::dead("rank7"), "its heartbeat has not moved for 3011 ms");
  const std::string gone = refusal();
  EXPECT_TRUE(contains(gone, "member id 'rank7' belonged to pid 4242, which its group took for gone (its heartbeat "
                             "has not moved for 3011 ms): a member id is never used again; start the new process "
                             "with an id of its own (DISTCOMM_FT_MEMBER_ID) as a joiner (DISTCOMM_FT_JOIN=1)"))
      << gone;
}

}  // namespace
// A heartbeat timeout from the environment below twice the heartbeat's interval is refused
// in the user's terms: the variable and the least it takes, not ManagerOptions' fields,
// which the user of a launcher never set.
TEST(FtManagerOptions, AHeartbeatTimeoutTooShortIsRefusedNamingTheVariable) {
  ::setenv("DISTCOMM_FT_HEARTBEAT_TIMEOUT_MS", "20", 1);
  ft::ManagerOptions o;
  o.initial_members = 2;
  o.joining = false;
  std::string refused;
  try {
    ft::Manager m(o);
  } catch (const InvalidArgument& e) {
    refused = e.what();
  }
  ::unsetenv("DISTCOMM_FT_HEARTBEAT_TIMEOUT_MS");
  EXPECT_NE(refused.find("DISTCOMM_FT_HEARTBEAT_TIMEOUT_MS=20: expected at least 200 ms"), std::string::npos)
      << refused;
}

}  // namespace distcomm
