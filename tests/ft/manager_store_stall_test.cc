// Stalls of the job's store that a member waits out (ft/store_stall.h), beyond those of
// begin_step's and commit's calls (manager_store_silence_test): Manager::finish's mark, and
// a step that the store stalls in again and again (a stall is no failure of the step: it must
// not count towards StepKeepsFailing).
//
// A real TCPStore server in a forked process, stopped (SIGSTOP: the connections stay open and
// nothing answers); members as threads (manager_harness.h), each Manager with its own
// connections to it.
#include <set>

#include "tests/ft/manager_harness.h"
#include "tests/testing/forked_store_server.h"

#include "api/store/internal/call_deadline.h"

namespace distcomm {
namespace {

// Longer than a dropped connection's reconnect may take (1 s: TCPStore's handshake bound)
// and than the heartbeat timeout (the monitor aborts its group), far less than the recovery
// timeout the members below wait a stall out for.
constexpr milliseconds kStall{2000};
constexpr std::chrono::seconds kRecoveryTimeout{15};

// Members whose Managers connect to `server`; each Manager's first connection (its caller's)
// is kept in *caller, for the test to drop.
std::function<StorePtr()> connect_to(const testing::ForkedStoreServer& server, std::shared_ptr<StorePtr> caller) {
  const int port = server.port();
  return [port, caller]() -> StorePtr {
    TCPStoreOptions so;
    so.host = "127.0.0.1";
    so.port = port;
    so.timeout = std::chrono::seconds(10);  // connecting; the Manager sets each call's bound
    StorePtr c = std::make_shared<TCPStore>(so);
    if (caller && !*caller) *caller = c;
    return c;
  };
}

// Drops `connection` if the store does not answer it now (a request cut short by its call
// deadline, as a group's stall watch's are): its next call must reconnect, which fails
// within a second while the server is stopped.
void drop_if_silent(const StorePtr& connection) {
  try {
    internal::StoreCallDeadline bound(Clock::now() + milliseconds(100), "the test's dropping of the connection");
    connection->check({"the test drops this connection"});
  } catch (const Timeout&) {
  }
}

// Stops the server now and lets it go on kStall later, from a thread of its own.
class Stalls {
 public:
  explicit Stalls(testing::ForkedStoreServer& server) : server_(server) {}
  ~Stalls() { join(); }
  // At most `most` stalls, one per generation: true when this call started one.
  bool once_in(uint64_t generation, size_t most) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stalled_.size() >= most || !stalled_.insert(generation).second) return false;
    server_.stop();
    threads_.emplace_back([this] {
      std::this_thread::sleep_for(kStall);  // the stall's length: what the test is about
      server_.cont();
      ++over_;
    });
    return true;
  }
  // Waits until every stall started has ended (the server answers again).
  bool wait_over() {
    return eventually([this] { return over_.load() == count(); }, kStall * 5);
  }
  size_t count() {
    std::lock_guard<std::mutex> lock(mu_);
    return stalled_.size();
  }
  void join() {
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

 private:
  testing::ForkedStoreServer& server_;
  std::mutex mu_;
  std::set<uint64_t> stalled_;
  std::vector<std::thread> threads_;
  std::atomic<size_t> over_{0};
};

// Step kStalledStep's failures of each member, by its FailureEvents.
constexpr uint64_t kStalledStep = 2;
size_t failures_of_stalled_step(const Member& m) {
  size_t n = 0;
  for (const ft::FailureEvent& f : m.ft->failures()) n += f.step == kStalledStep ? 1 : 0;
  return n;
}

// Each member failed the stalled step once per stall (the tests are about that), every
// failure a stall's, and none of them stopped the job.
void expect_every_failure_a_stall(const std::vector<Member*>& members) {
  for (const Member* m : members) {
    EXPECT_EQ(failures_of_stalled_step(*m), size_t(ft::kSameStepFailures)) << m->id;
    for (const ft::FailureEvent& f : m->ft->failures()) {
      EXPECT_TRUE(contains(f.why, "store stall: ")) << m->id << ": " << f.why;
    }
  }
}

class FtManagerStoreStall : public FtManager {
 protected:
  // Two members over `server`, their caller connections in callers_.
  std::vector<Member*> two_members(testing::ForkedStoreServer& server) {
    std::vector<Member*> members;
    for (int r = 0; r < 2; ++r) {
      Member& m = add_member("rank" + std::to_string(r), r);
      ft::ManagerOptions o = options(m.id, 2);
      o.recovery_timeout = kRecoveryTimeout;
      callers_[m.id] = std::make_shared<StorePtr>();
      o.connect = connect_to(server, callers_[m.id]);
      m.ft = std::make_unique<ft::Manager>(o);
      members.push_back(&m);
    }
    return members;
  }
  std::map<std::string, std::shared_ptr<StorePtr>> callers_;
};

// finish() writes the "finished" mark with a compare_set: asked again through a stall, it
// finds its own mark or another member's. It used to throw the reconnect's StoreError ("did
// not answer the handshake") a second into a stall its recovery timeout promised to wait out.
TEST_F(FtManagerStoreStall, FinishWaitsOutAStoreStall) {
  testing::ForkedStoreServer server;
  Member& m = add_member("rank0", 0);
  ft::ManagerOptions o = options(m.id, 1);
  o.recovery_timeout = kRecoveryTimeout;
  auto caller = std::make_shared<StorePtr>();
  o.connect = connect_to(server, caller);
  m.ft = std::make_unique<ft::Manager>(o);
  train(m, 2);
  ASSERT_EQ(m.error, "");
  Stalls stalls(server);
  ASSERT_TRUE(stalls.once_in(0, 1));
  drop_if_silent(*caller);
  const Clock::time_point before = Clock::now();
  std::string error;
  try {
    m.ft->finish();
  } catch (const Error& e) {
    error = e.what();
  }
  const double took_s = std::chrono::duration<double>(Clock::now() - before).count();
  stalls.join();
  EXPECT_EQ(error, "");
  // It waited for the store (most of the stall), not the recovery timeout.
  EXPECT_LT(took_s, std::chrono::duration<double>(kRecoveryTimeout).count()) << error;
  PrefixStore ft_keys(ft::keys::kRoot, server.client(std::chrono::seconds(10)));
  ASSERT_TRUE(ft_keys.check({ft::keys::kFinished}));
  EXPECT_EQ(ft_keys.get_string(ft::keys::kFinished), "2");
}

// The store stalls as the members go into step 2's commit, their caller connections dropped:
// the count of the step's finishers gets no answer (it is not asked again: it may have been
// counted), and the step is aborted and redone by every member in a new generation. Three
// such stalls in a row at the same step are three generations failing it with the same
// members: the job used to stop with StepKeepsFailing ("not a lost rank but an error that
// every member hits each time"), for stalls it had waited out.
TEST_F(FtManagerStoreStall, ThreeStallsInTheCountOfOneStepDoNotStopTheJob) {
  constexpr uint64_t kSteps = 4;
  testing::ForkedStoreServer server;
  std::vector<Member*> members = two_members(server);
  Stalls stalls(server);
  Script script;
  script.after_op = [&](Member& m, uint64_t s) {
    if (s != kStalledStep) return;
    stalls.once_in(m.ft->generation().number, ft::kSameStepFailures);
    drop_if_silent(*callers_.at(m.id));
  };
  train_all(members, kSteps, script);
  stalls.join();
  ASSERT_EQ(stalls.count(), size_t(ft::kSameStepFailures));
  expect_consistent(members, kSteps, [](uint64_t) { return all_of(2); });
  expect_every_failure_a_stall(members);
  for (Member* m : members) EXPECT_EQ(ids_of(m->ft->generation().members), "rank0,rank1") << m->id;
}

// The store stalls while the members are in step 2's op, past the heartbeat timeout: each
// member's monitor aborts its group (it cannot tell a stall from a partition), the op fails,
// and once the store answers again (no dead mark) the step is redone by all. Three such
// stalls in a row at the same step must not stop the job either.
TEST_F(FtManagerStoreStall, ThreeStallsThatAbortOneStepsGroupDoNotStopTheJob) {
  constexpr uint64_t kSteps = 4;
  testing::ForkedStoreServer server;
  std::vector<Member*> members = two_members(server);
  Stalls stalls(server);
  Script script;
  // rank0, before its op: the store stops, and rank0 goes into its op once the stall is over
  // (its group aborted by its monitor meanwhile); rank1 waits in its op for rank0 until its
  // own monitor aborts it.
  script.die_at = [&](Member& m, uint64_t s, const ProcessGroupPtr&) {
    if (s != kStalledStep || m.id != "rank0") return false;
    if (!stalls.once_in(m.ft->generation().number, ft::kSameStepFailures)) return false;
    EXPECT_TRUE(stalls.wait_over());  // its monitor aborted its group meanwhile (kStall > heartbeat timeout)
    return false;
  };
  train_all(members, kSteps, script);
  stalls.join();
  ASSERT_EQ(stalls.count(), size_t(ft::kSameStepFailures));
  expect_consistent(members, kSteps, [](uint64_t) { return all_of(2); });
  expect_every_failure_a_stall(members);
}

}  // namespace
}  // namespace distcomm
