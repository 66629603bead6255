// The job's store silent: for everyone (a stall: nobody is dropped, the job goes on), or for
// good (a member that takes itself for lost ends its use of the store: a commit under way,
// and what its Manager and group still ask on their way out, fail at once instead of each
// waiting for the silent store). Found over 3 netns hosts (host 1's link cut,
// netns_lost_store_test): the member's monitor judged it lost in 3 s, yet it ended 12-43 s
// after the cut, in its group's teardown (GroupFailure's records, the stall watch, 3 s
// each), and a commit whose ADD was under way at the cut waited the op timeout.
//
// A real TCPStore server in a forked process, stopped (SIGSTOP: the connections stay open
// and nothing answers, as a store's host cut off); members as threads (manager_harness.h),
// each Manager with its own connections to it.
#include "tests/ft/manager_harness.h"
#include "tests/testing/forked_store_server.h"
#include "tests/testing/forwarding_store.h"

#include "api/store/internal/call_deadline.h"

namespace distcomm {
namespace {

using std::chrono::duration;

// Members whose Managers connect to `server` (each connection its own TCPStore).
std::function<StorePtr()> connect_to(const testing::ForkedStoreServer& server) {
  const int port = server.port();
  return [port]() -> StorePtr {
    TCPStoreOptions so;
    so.host = "127.0.0.1";
    so.port = port;
    so.timeout = std::chrono::seconds(10);  // connecting; the Manager sets each call's bound
    return std::make_shared<TCPStore>(so);
  };
}

// The store stops answering everyone (its process stopped) for four heartbeat timeouts,
// then answers again: a stall of the store is no member's fault, and nobody is dropped. Each
// member aborts its step's group at the heartbeat timeout (it cannot tell a partition from
// a stall) and goes on once a beat gets through; the generation is formed again with every
// member and the job ends exact. Found by an outside tester: a 4 s stop of the launcher that
// served the store ended the whole job (6 of 6): every member took itself for lost at 3 s,
// and an observer's first read after a stall took the others for gone.
TEST_F(FtManager, AStoreThatStallsForEveryoneDropsNobody) {
  constexpr uint64_t kSteps = 8;
  testing::ForkedStoreServer server;
  std::vector<Member*> members;
  for (int r = 0; r < 3; ++r) {
    Member& m = add_member("rank" + std::to_string(r), r);
    ft::ManagerOptions o = options(m.id, 3);
    o.connect = connect_to(server);
    members.push_back(&m);
    m.ft = std::make_unique<ft::Manager>(o);
  }
  std::once_flag stall_once;
  std::thread staller;
  Script script;
  // From a thread of its own, so that the members go on into their commits and the next
  // steps' calls while the store is stopped (waits, reconnects, the verdict's retries).
  script.after_op = [&](Member&, uint64_t s) {
    if (s != 2) return;
    std::call_once(stall_once, [&] {
      server.stop();
      staller = std::thread([&] {
        std::this_thread::sleep_for(4 * kHeartbeatTimeout);
        server.cont();
      });
    });
  };
  train_all(members, kSteps, script);
  staller.join();
  expect_consistent(members, kSteps, [](uint64_t) { return all_of(3); });
  for (Member* m : members) {
    EXPECT_EQ(ids_of(m->ft->generation().members), "rank0,rank1,rank2") << m->id;
  }
}

// The store stops for longer than a reconnect's handshake may take (1 s: TCPStore's bound
// after a dropped connection) and far less than the recovery timeout, as the members go into
// their commits, each with its caller's connection dropped (a call of it cut short by a call
// deadline, as a group's stall watch's are): the commit's first store call reconnects into
// the stopped server and fails ("accepted the connection but did not answer the handshake").
// Found by an outside user (3 launchers x 2 ranks, node 0's launcher stopped for 10 s): 4 of 6
// members ended "lost the job's store in commit" 9 s into a stall their recovery timeout
// (60 s) promised to wait out. Now each such call is asked again until the store answers; the
// count of a member whose ADD got no answer is not asked again (it may have been counted: the
// step is aborted and redone by all), so no step is applied by some only.
TEST_F(FtManager, AStoreStallLongerThanAReconnectIsWaitedOutInCommit) {
  constexpr uint64_t kSteps = 5;
  constexpr milliseconds kStall{3000};  // > the 1 s reconnect, < the 10 s recovery timeout
  testing::ForkedStoreServer server;
  std::vector<Member*> members;
  std::map<std::string, std::shared_ptr<StorePtr>> callers;  // each member's caller connection
  for (int r = 0; r < 2; ++r) {
    Member& m = add_member("rank" + std::to_string(r), r);
    ft::ManagerOptions o = options(m.id, 2);
    o.recovery_timeout = std::chrono::seconds(10);
    auto caller = std::make_shared<StorePtr>();
    callers[m.id] = caller;
    o.connect = [connect = connect_to(server), caller] {
      StorePtr c = connect();
      if (!*caller) *caller = c;  // the Manager's first connection is its caller's
      return c;
    };
    m.ft = std::make_unique<ft::Manager>(o);
    members.push_back(&m);
  }
  std::once_flag stall_once;
  std::thread staller;
  Script script;
  script.after_op = [&](Member& m, uint64_t s) {
    if (s != 2 || m.redone > 0) return;
    std::call_once(stall_once, [&] {
      server.stop();
      staller = std::thread([&] {
        std::this_thread::sleep_for(kStall);
        server.cont();
      });
    });
    // This member's caller connection dropped, if the store is still stopped (a member that
    // came late may find it answering again): a request cut short by its call deadline.
    try {
      internal::StoreCallDeadline bound(Clock::now() + milliseconds(100), "the test's dropping of the connection");
      (*callers.at(m.id))->check({"the test drops this connection"});
    } catch (const Timeout&) {
    }
  };
  train_all(members, kSteps, script);
  staller.join();
  expect_consistent(members, kSteps, [](uint64_t) { return all_of(2); });
  for (Member* m : members) {
    EXPECT_EQ(ids_of(m->ft->generation().members), "rank0,rank1") << m->id;
  }
}

TEST_F(FtManager, AMemberLostToTheStoreEndsItsCommitAndItsManagerAtOnce) {
  testing::ForkedStoreServer server;
  std::vector<Member*> members;
  for (int r = 0; r < 2; ++r) {
    Member& m = add_member("rank" + std::to_string(r), r);
    ft::ManagerOptions o = options(m.id, 2);
    // What a commit's store call waits without the cut-off: the test's bound below is far under it.
    o.op_timeout = std::chrono::seconds(15);
    // How long a member blind to the store waits for it before it takes itself for lost.
    o.recovery_timeout = std::chrono::seconds(2);
    o.connect = connect_to(server);
    m.ft = std::make_unique<ft::Manager>(o);
    members.push_back(&m);
  }
  std::atomic<int64_t> stopped_at_ns{0};
  std::once_flag stop_once;
  Script script;
  // After step 2's op, before its commit: the members go into commit's store calls with
  // the server stopped.
  script.after_op = [&](Member&, uint64_t s) {
    if (s != 2) return;
    std::call_once(stop_once, [&] {
      server.stop();
      stopped_at_ns = Clock::now().time_since_epoch().count();
    });
  };
  std::vector<std::thread> threads;
  for (Member* m : members) threads.emplace_back([m, &script] { train(*m, 5, script); });
  const bool ended = eventually([&] { return all_finished(members); }, milliseconds(30000));
  const Clock::time_point stopped(Clock::duration(stopped_at_ns.load()));
  const double ended_s = duration<double>(Clock::now() - stopped).count();
  if (!ended) server.cont();  // lets a call still waiting go on, should the check fail
  for (auto& t : threads) t.join();
  ASSERT_TRUE(ended);
  for (Member* m : members) {
    EXPECT_TRUE(contains(m->error, "ft: member '" + m->id + "' lost the job's store in commit")) << m->error;
    EXPECT_EQ(m->ft->committed_steps(), 2u) << m->id;
  }
  // The recovery timeout (2 s) and a tick, not the op timeout's 15 s.
  EXPECT_LT(ended_s, 5.0) << members[0]->error;
  // Its Manager and the step's group go without a word to the store: each call fails at once.
  for (Member* m : members) {
    const Clock::time_point before = Clock::now();
    m->ft.reset();
    EXPECT_LT(duration<double>(Clock::now() - before).count(), 1.0) << m->id;
  }
}

// A store that can be cut off, as a member partitioned from the store's host sees it.
class CutOffStore : public testing::ForwardingStore {
 public:
  explicit CutOffStore(StorePtr base) : ForwardingStore(base) { timeout_ = base->timeout(); }
  std::atomic<bool> cut{false};
  std::string error = "TCPStore: cannot connect to 10.0.0.1:29500 after 1 s: Connection timed out";
  using Store::set;
  void set(const std::string& k, const Bytes& v) override { reach(), ForwardingStore::set(k, v); }
  Bytes get(const std::string& k) override { return reach(), ForwardingStore::get(k); }
  int64_t add(const std::string& k, int64_t d) override { return reach(), ForwardingStore::add(k, d); }
  Bytes compare_set(const std::string& k, const Bytes& e, const Bytes& d) override {
    return reach(), ForwardingStore::compare_set(k, e, d);
  }
  bool check(const std::vector<std::string>& k) override { return reach(), ForwardingStore::check(k); }
  void wait(const std::vector<std::string>& k, std::chrono::milliseconds t) override {
    reach(), ForwardingStore::wait(k, t);
  }
  bool delete_key(const std::string& k) override { return reach(), ForwardingStore::delete_key(k); }
  int64_t num_keys() override { return reach(), ForwardingStore::num_keys(); }

 private:
  void reach() const {
    if (cut) throw StoreError(error);
  }
};

// A member whose store fails in its commit (the CutOffStore's error, its default when ""):
// the error its commit throws.
class FtManagerStoreLoss : public FtManager {
 protected:
  std::string commit_error_after_the_store_fails(const std::string& id, const std::string& store_error) {
    Member& m = add_member(id, 0);
    ft::ManagerOptions o = options(m.id, 1);
    // A commit asks a store that may answer again until its monitor takes it for lost (no
    // beat through for this long): the test's wait.
    o.recovery_timeout = std::chrono::seconds(2);
    auto cut_off = std::make_shared<CutOffStore>(store_);
    if (!store_error.empty()) cut_off->error = store_error;
    o.connect = [cut_off] { return cut_off; };
    m.ft = std::make_unique<ft::Manager>(o);
    std::vector<Tensor*> state{&m.state};
    ProcessGroupPtr pg = m.ft->begin_step(state);
    EXPECT_TRUE(pg != nullptr);
    cut_off->cut = true;
    std::string what = "commit succeeded without the store";
    try {
      m.ft->commit();
    } catch (const StoreError& e) {
      what = e.what();
    }
    pg.reset();
    m.ft.reset();
    return what;
  }
};

// A member that loses the job's store (partitioned away) ends with an error that says so in
// ft's words, after the store's own (helper-98: only "TCPStore: cannot connect to ...").
TEST_F(FtManagerStoreLoss, AMemberThatLosesTheStoreSaysSo) {
  const std::string what = commit_error_after_the_store_fails("rank0", "");
  EXPECT_TRUE(contains(what, "TCPStore: cannot connect to 10.0.0.1:29500")) << what;
  EXPECT_TRUE(contains(what, "ft: member 'rank0' lost the job's store in commit")) << what;
}

// A store whose server has ended (its host refuses connections: node 0's launcher killed)
// is said as such, not as a partition (ft probe: "(a partition, or the store's host down)").
TEST_F(FtManagerStoreLoss, AMemberWhoseStoreEndedSaysItsServerExited) {
  const std::string what = commit_error_after_the_store_fails(
      "rank0", "TCPStore: cannot connect to 10.0.0.1:29500 after 100 ms: Connection refused");
  EXPECT_TRUE(contains(what, "ft: member 'rank0' lost the job's store in commit: the store's host refuses "
                             "connections, so the process that served the store (the launcher of node 0, or "
                             "rank 0) has exited or closed it; it ends here"))
      << what;
  EXPECT_FALSE(contains(what, "a partition")) << what;
}

// A connection to a store whose server stops answering this member (a link cut with no FIN:
// the calls go out and nothing comes back), while the others still reach it. Silent, a call
// waits for an answer up to the connection's timeout (the Manager sets it: op_timeout for the
// caller's, heartbeat_timeout for the monitor's) and fails then, as a TCPStore's does; one
// under way when the silence ends is answered. One per connection: each has its timeout.
class SilentStore : public testing::ForwardingStore {
 public:
  SilentStore(StorePtr base, std::shared_ptr<std::atomic<bool>> silent)
      : ForwardingStore(std::move(base)), silent_(std::move(silent)) {}
  using Store::set;
  void set(const std::string& k, const Bytes& v) override { answer(), ForwardingStore::set(k, v); }
  Bytes get(const std::string& k) override { return answer(), ForwardingStore::get(k); }
  int64_t add(const std::string& k, int64_t d) override { return answer(), ForwardingStore::add(k, d); }
  Bytes compare_set(const std::string& k, const Bytes& e, const Bytes& d) override {
    return answer(), ForwardingStore::compare_set(k, e, d);
  }
  bool check(const std::vector<std::string>& k) override { return answer(), ForwardingStore::check(k); }
  void wait(const std::vector<std::string>& k, std::chrono::milliseconds t) override {
    answer(resolve(t)), ForwardingStore::wait(k, resolve(t));
  }
  bool delete_key(const std::string& k) override { return answer(), ForwardingStore::delete_key(k); }
  int64_t num_keys() override { return answer(), ForwardingStore::num_keys(); }

 private:
  void answer(std::chrono::milliseconds t = kUseDefault) const {
    const milliseconds limit = is_use_default(t) ? timeout_ : t;
    const auto deadline = Clock::now() + limit;
    while (*silent_) {
      if (Clock::now() >= deadline) {
        throw Timeout("TCPStore: 10.0.0.1:29500 did not answer within " + std::to_string(limit.count()) + " ms");
      }
      std::this_thread::sleep_for(milliseconds(2));
    }
  }
  const std::shared_ptr<std::atomic<bool>> silent_;
};

// A member cut off from the store (and so from the others: its op's peers never answer)
// while it is inside an op, with no connection closed to end it: it must not wait the op's
// whole timeout (found by an outside tester: gloo ranks of a host whose link was cut stayed
// in their all_reduce for 1800 s, long after the others had taken them for gone, fenced
// them and finished). Once no heartbeat of it has reached the store for the heartbeat
// timeout, the bound by which the others drop it, its monitor aborts its group; once none
// has for its recovery timeout (a stall of the store for everyone would have ended), its
// commit says that it lost the store. rank0 stops in the step (its group held: in_process
// would end every rank's op if a rank's group went) and its Manager goes, so that nobody
// else's monitor aborts rank1's op; rank1's own silent store cannot tell it rank0 is gone.
TEST_F(FtManager, AMemberCutOffFromTheStoreInAnOpAbortsItAfterTheHeartbeatTimeout) {
  auto silent = std::make_shared<std::atomic<bool>>(false);
  std::vector<Member*> members;
  for (int r = 0; r < 2; ++r) {
    Member& m = add_member("rank" + std::to_string(r), r);
    ft::ManagerOptions o = options(m.id, 2);
    o.op_timeout = std::chrono::seconds(6);  // what the op would wait without the fix
    // How long a member blind to the store waits for it (a stall of the store for everyone
    // would end by then) before it takes itself for lost.
    o.recovery_timeout = std::chrono::seconds(2);
    if (r == 1) {
      StorePtr store = store_;
      o.connect = [store, silent] { return std::make_shared<SilentStore>(store, silent); };
    }
    m.ft = std::make_unique<ft::Manager>(o);
    members.push_back(&m);
  }
  std::atomic<bool> rank1_in_step1{false};
  std::atomic<int64_t> cut_at_ns{0}, rank1_op_ended_ns{0};
  Script script;
  script.after_op = [&](Member& m, uint64_t s) {
    if (m.id == "rank1" && s == 1) rank1_op_ended_ns = Clock::now().time_since_epoch().count();
  };
  script.die_at = [&](Member& m, uint64_t s, const ProcessGroupPtr& pg) {
    if (s != 1) return false;
    if (m.id == "rank1") {
      rank1_in_step1 = true;  // on its way into the op, with no store call before it
      return false;
    }
    EXPECT_TRUE(eventually([&] { return rank1_in_step1.load(); }));
    m.held = pg;
    *silent = true;  // first: rank1's monitor must not see rank0's heartbeat stop
    cut_at_ns = Clock::now().time_since_epoch().count();
    m.ft.reset();
    return true;
  };
  std::vector<std::thread> threads;
  for (Member* m : members) threads.emplace_back([m, &script] { train(*m, 3, script); });
  const bool ended = eventually([&] { return members[1]->finished.load(); }, milliseconds(30000));
  const Clock::time_point cut(Clock::duration(cut_at_ns.load()));
  const double took_s = std::chrono::duration<double>(Clock::now() - cut).count();
  *silent = false;  // lets a call still waiting go on, should the check fail
  for (auto& t : threads) t.join();
  ASSERT_TRUE(ended);
  const std::string& error = members[1]->error;
  // Its op ended at the heartbeat timeout, not at the op's 6 s: not before the others can
  // have dropped it.
  const double op_took_s =
      std::chrono::duration<double>(Clock::time_point(Clock::duration(rank1_op_ended_ns.load())) - cut).count();
  EXPECT_GE(op_took_s, 0.9 * std::chrono::duration<double>(kHeartbeatTimeout).count());
  EXPECT_LT(op_took_s, 3.0) << error;
  // It ends with the store's silence named. How soon: a real TCPStore is cut off at the
  // recovery timeout (manager_store_silence_test); this stand-in fails a commit's call at
  // its timeout (the op timeout), which is also the bound.
  EXPECT_FALSE(error.empty());
  EXPECT_TRUE(contains(error, "10.0.0.1:29500 did not answer")) << error;
  EXPECT_LT(took_s, 10.0) << error;
}

// A store silent for less than the heartbeat timeout (a blip) aborts nothing: the others
// still count the member, and so does it.
TEST_F(FtManager, AStoreSilentForLessThanTheHeartbeatTimeoutAbortsNothing) {
  constexpr uint64_t kSteps = 5;
  auto silent = std::make_shared<std::atomic<bool>>(false);
  std::vector<Member*> members;
  for (int r = 0; r < 2; ++r) {
    Member& m = add_member("rank" + std::to_string(r), r);
    ft::ManagerOptions o = options(m.id, 2);
    if (r == 1) {
      StorePtr store = store_;
      o.connect = [store, silent] { return std::make_shared<SilentStore>(store, silent); };
    }
    m.ft = std::make_unique<ft::Manager>(o);
    members.push_back(&m);
  }
  Script script;
  script.after_op = [&](Member& m, uint64_t s) {
    if (m.id != "rank1" || s != 2) return;
    *silent = true;
    std::this_thread::sleep_for(kHeartbeatTimeout / 3);
    *silent = false;
  };
  train_all(members, kSteps, script);
  expect_consistent(members, kSteps, [](uint64_t) { return all_of(2); });
  for (Member* m : members) EXPECT_EQ(m->redone, 0) << m->id;
}

}  // namespace
}  // namespace distcomm
