// How an shm rank learns that a peer's process has ended, where the old signal (the lock on
// the peer's memfd) lied or was not looked at:
//   - the peer forked a child that lives on (a data loader worker): the child holds the
//     memfd, so the lock stayed; the peer's pidfd does not;
//   - the peer dies while the group is being created, after publishing its segment;
//   - steady point-to-point traffic with one peer while a collective waits for a dead one.
// In each case the survivors fail with a PeerFailure naming the dead rank within a second
// of its death (their op timeout is a minute).
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>

#include <gtest/gtest.h>

#include "api/errors.h"
#include "api/store/store.h"
#include "tests/testing/failure_checks.h"
#include "tests/testing/forwarding_store.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace {

using std::chrono::milliseconds;
using testing::expect_failure_within;
using testing::GroupHarnessOptions;
using testing::run_group;

// CLOCK_MONOTONIC is the host's: a time taken in one rank is comparable in another.
int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Records the moment just before this rank dies, for the survivors to time against.
[[noreturn]] void die_now(Store& store) {
  store.set("test/killed_at", std::to_string(now_ns()));
  ::raise(SIGKILL);
  ::_exit(1);  // not reached
}

double seconds_since_death(Store& store) {
  const int64_t killed_at = std::stoll(store.get_string("test/killed_at"));
  return static_cast<double>(now_ns() - killed_at) / 1e9;
}

void expect_names(const std::string& message, const std::string& what) {
  EXPECT_NE(message.find(what), std::string::npos) << "the error should name " << what << ": " << message;
}

GroupHarnessOptions rank_1_is_killed() {
  GroupHarnessOptions options;
  options.op_timeout = milliseconds(60000);  // far above the bound checked
  options.run.may_be_killed = {1};
  return options;
}

// Rank 1 forks a child that sleeps 30 s (it inherits every descriptor, the segment's memfd
// too), then is SIGKILLed while ranks 0 and 2 wait for it in an all_reduce.
void killed_rank_with_a_forked_child(const std::string& backend) {
  run_group(3, backend, [](ProcessGroup& pg) {
    Store& store = *pg.store();
    Tensor t = Tensor::zeros({1000});
    pg.all_reduce(t)->wait();  // the group runs (and on auto, runs on shm)
    if (pg.rank() == 1) {
      const pid_t child = ::fork();
      if (child == 0) {
        ::sleep(30);
        ::_exit(0);
      }
      ASSERT_GT(child, 0);
      store.set("test/child", std::to_string(child));
      store.wait({"test/in_op/0", "test/in_op/2"}, milliseconds(30000));
      die_now(store);
    }
    WorkPtr w = pg.all_reduce(t);
    store.set("test/in_op/" + std::to_string(pg.rank()), "1");
    const std::string msg =
        expect_failure_within<PeerFailure>([&] { w->wait(); }, 0, 30, "all_reduce with rank 1 killed, its child alive");
    EXPECT_LT(seconds_since_death(store), 1.0) << "rank 1 was named this long after its death: " << msg;
    expect_names(msg, "rank 1");
    ::kill(static_cast<pid_t>(std::stoi(store.get_string("test/child"))), SIGKILL);  // done with it
  }, rank_1_is_killed());
}

TEST(ShmLiveness, AForkedChildDoesNotKeepAKilledRankAlive) { killed_rank_with_a_forked_child("shm"); }

TEST(ShmLiveness, AForkedChildDoesNotKeepAKilledRankAliveOnAuto) { killed_rank_with_a_forked_child("auto"); }

// Forwards to the harness's store; on the rank it is told to, dies the moment the shm
// rendezvous announces that this rank has mapped every segment (its own published, the
// peers' opened): the others then wait for that announcement.
class DyingStore final : public testing::ForwardingStore {
 public:
  DyingStore(StorePtr inner, bool dies) : ForwardingStore(std::move(inner)), dies_(dies) {}
  using Store::set;
  void set(const std::string& key, const Bytes& value) override {
    if (dies_ && key.find("shm/mapped/") != std::string::npos) die_now(inner());
    ForwardingStore::set(key, value);
  }

 private:
  const bool dies_;
};

TEST(ShmLiveness, ARankThatDiesWhileTheGroupIsCreatedIsNamed) {
  run_group(3, "shm", [](ProcessGroup& world) {
    ProcessGroupOptions o;
    o.store = std::make_shared<DyingStore>(world.store(), world.rank() == 1);
    o.rank = world.rank();
    o.size = world.size();
    o.backend = "shm";
    o.group_name = "dies_at_creation";
    o.timeout = milliseconds(60000);
    const std::string msg = expect_failure_within<PeerFailure>([&] { ProcessGroup::create(o); }, 0, 30,
                                                               "group creation with rank 1 killed half-way");
    EXPECT_LT(seconds_since_death(*world.store()), 1.0) << "rank 1 was named this long after its death: " << msg;
    expect_names(msg, "rank 1");
    expect_names(msg, "died");
  }, rank_1_is_killed());
}

// Rank 2 streams messages to rank 0 while both wait in an all_reduce for rank 1, which is
// killed: rank 0's polls keep moving data, and still it must look at rank 1.
TEST(ShmLiveness, SteadyTrafficDoesNotHideACollectiveStuckOnADeadRank) {
  GroupHarnessOptions options = rank_1_is_killed();
  options.backend_config = {{"shm_p2p_chunk_bytes", "128"}, {"shm_p2p_depth", "1024"}};
  run_group(3, "shm", [](ProcessGroup& pg) {
    Store& store = *pg.store();
    if (pg.rank() == 1) {
      store.wait({"test/streaming"}, milliseconds(30000));
      die_now(store);
    }
    Tensor t = Tensor::zeros({10});
    WorkPtr stuck = pg.all_reduce(t);
    Tensor message = Tensor::zeros({256});
    bool announced = false;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    const std::string msg = expect_failure_within<PeerFailure>(
        [&] {
          while (std::chrono::steady_clock::now() < give_up) {
            if (pg.rank() == 0) {
              WorkPtr a = pg.recv(message, 2), b = pg.recv(message, 2);
              a->wait();
              b->wait();
            } else {
              WorkPtr a = pg.send(message, 0), b = pg.send(message, 0);
              a->wait();
              b->wait();
            }
            if (!announced && pg.rank() == 0) store.set("test/streaming", "1");
            announced = true;
          }
        },
        0, 30, "streaming beside an all_reduce that waits for a killed rank");
    EXPECT_LT(seconds_since_death(store), 1.0) << "rank 1 was named this long after its death: " << msg;
    expect_names(msg, "rank 1");
    EXPECT_THROW(stuck->wait(), PeerFailure);
  }, options);
}

}  // namespace
}  // namespace distcomm
