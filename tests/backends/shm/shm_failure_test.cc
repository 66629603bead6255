// How an shm group fails: a rank killed in the middle of a 64 MiB all_reduce, a rank that
// never joins, a group destroyed or aborted while a peer is in an op, a dead sender. The
// rule under test: a failure on one rank never becomes a hang on another; the others fail
// within a short bound (far below the op timeout) with an error naming the culprit rank,
// later ops fail at once, and nothing is left behind in /dev/shm or in the survivors' maps.
#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "api/errors.h"
#include "api/process_group.h"
#include "tests/testing/failure_checks.h"
#include "tests/testing/forwarding_store.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace {

using std::chrono::milliseconds;
using testing::Clock;
using testing::expect_failure_within;
using testing::GroupHarnessOptions;
using testing::mark_done;
using testing::run_group;
using testing::seconds_since;
using testing::wait_for_done;

std::set<std::string> dev_shm_entries() {
  std::set<std::string> names;
  if (DIR* d = ::opendir("/dev/shm")) {
    while (dirent* e = ::readdir(d)) names.insert(e->d_name);
    ::closedir(d);
  }
  return names;
}

// Lines of /proc/self/maps that map a segment of `group`.
int mapped_segments_of(const std::string& group) {
  std::ifstream maps("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);) {
    if (line.find("memfd:distcomm-shm-" + group + "-rank") != std::string::npos) ++n;
  }
  return n;
}

void expect_names(const std::string& message, const std::string& what, const std::string& context) {
  EXPECT_NE(message.find(what), std::string::npos) << context << " should name " << what << ": " << message;
}

// The failure shm is built to survive: SIGKILL one rank in the middle of a 64 MiB all_reduce.
// Rank 1's input has an inaccessible page at its middle: the backend faults there while
// copying it into its slot, half-way through the op, and the fault handler raises SIGKILL.
TEST(ShmFailure, RankKilledInTheMiddleOfA64MiBAllReduce) {
  const std::set<std::string> before = dev_shm_entries();
  GroupHarnessOptions options;
  options.op_timeout = milliseconds(30000);
  options.run.may_be_killed = {1};
  run_group(3, "shm", [](ProcessGroup& world) {
    constexpr int64_t kCount = 16 << 20;  // 64 MiB of float32
    ProcessGroupPtr pg = world.new_group({0, 1, 2});
    const std::string name = "world/g0";
    ASSERT_EQ(mapped_segments_of(name), 3) << "each rank maps the three segments of its group";
    if (pg->rank() == 1) {
      const size_t bytes = kCount * sizeof(float);
      void* mem = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      ASSERT_NE(mem, MAP_FAILED);
      std::fill_n(static_cast<float*>(mem), kCount, 1.0f);
      ::mprotect(static_cast<char*>(mem) + bytes / 2, 4096, PROT_NONE);
      ::signal(SIGSEGV, [](int) { ::raise(SIGKILL); });
      Tensor t = Tensor::from_blob(mem, {kCount}, DType::kFloat32);
      pg->all_reduce(t)->wait();
      ADD_FAILURE() << "rank 1 should have died in its all_reduce";
      return;
    }
    Tensor t = Tensor::zeros({kCount});
    const std::string msg = expect_failure_within<PeerFailure>([&] { pg->all_reduce(t)->wait(); }, 0, 5,
                                                                "all_reduce with a rank killed half-way");
    expect_names(msg, "rank 1", "the error");
    expect_names(msg, "all_reduce #0", "the error");
    const auto start = Clock::now();
    EXPECT_THROW(pg->barrier()->wait(), PeerFailure) << "a later op fails too";
    EXPECT_LT(seconds_since(start), 0.5) << "and fails at once";
    pg.reset();
    EXPECT_EQ(mapped_segments_of(name), 0) << "the destroyed group left segments mapped";
  }, options);
  std::set<std::string> added;
  for (const std::string& n : dev_shm_entries()) {
    if (!before.count(n) && n.find("distcomm") != std::string::npos) added.insert(n);
  }
  EXPECT_TRUE(added.empty()) << "left in /dev/shm: " << *added.begin();
}

TEST(ShmFailure, RankThatNeverJoinsMakesOthersTimeOut) {
  GroupHarnessOptions options;
  options.op_timeout = milliseconds(2000);
  run_group(3, "shm", [](ProcessGroup& pg) {
    if (pg.rank() == 2) {
      wait_for_done(pg, {0, 1});  // never joins the all_reduce
      // The others published their timeout: this rank's next op fails at once with it.
      const std::string msg = expect_failure_within<Timeout>([&] { pg.barrier()->wait(); }, 0, 1,
                                                             "barrier after the others timed out");
      expect_names(msg, "timed out", "the published reason");
      return;
    }
    Tensor t = Tensor::zeros({1000});
    const std::string msg = expect_failure_within<Timeout>([&] { pg.all_reduce(t)->wait(); }, 1.9, 2 + 2,
                                                           "all_reduce with a rank missing");
    expect_names(msg, "all_reduce #0", "the error");
    expect_names(msg, "rank 2", "the error");
    // Refused with the first failure, well before the 2 s it would wait for a missing rank.
    const std::string later = expect_failure_within<Timeout>([&] { pg.barrier()->wait(); }, 0, 1.5, "barrier after");
    expect_names(later, "all_reduce #0", "a later op's error");
    mark_done(pg);
  }, options);
}

// A store whose set of this rank's shm segment address fails: its part of the creation
// fails before the others can see it, and only the error it leaves says why.
class RefusingSegmentStore : public testing::ForwardingStore {
 public:
  RefusingSegmentStore(StorePtr inner, bool refuses) : ForwardingStore(std::move(inner)), refuses_(refuses) {}
  using Store::set;
  void set(const std::string& key, const Bytes& value) override {
    if (refuses_ && key.find("shm/segment/") != std::string::npos) throw StoreError("test: segment address refused");
    ForwardingStore::set(key, value);
  }

 private:
  const bool refuses_;
};

// The others wait in the store (blocking, not sleeping between looks) for an address that
// never comes: they must still look for the error rank 1 left, and end within a second or
// two of it with its reason, not at the creation's 60 s deadline.
TEST(ShmFailure, ARankThatFailsBeforePublishingEndsTheOthersCreationWithItsReason) {
  run_group(3, "shm", [](ProcessGroup& world) {
    ProcessGroupOptions o;
    o.store = std::make_shared<RefusingSegmentStore>(world.store(), world.rank() == 1);
    o.rank = world.rank();
    o.size = world.size();
    o.backend = "shm";
    o.group_name = "refused_at_creation";
    o.timeout = milliseconds(60000);
    const std::string msg = expect_failure_within<Error>([&] { ProcessGroup::create(o); }, 0, 5,
                                                         "group creation with rank 1's address refused");
    EXPECT_NE(msg.find("segment address refused"), std::string::npos) << "rank 1's reason should be quoted: " << msg;
    if (world.rank() != 1) {
      EXPECT_NE(msg.find("rank 1"), std::string::npos) << msg;
    }
  });
}

TEST(ShmFailure, PerOpTimeoutAndWaitTimeout) {
  run_group(2, "shm", [](ProcessGroup& pg) {  // group timeout: 60 s
    Tensor t = Tensor::of<float>({1.0f});
    if (pg.rank() == 1) {
      wait_for_done(pg, {0});
      pg.all_reduce(t)->wait();  // joins late: rank 0's op has gone on meanwhile
      EXPECT_EQ(t.item(), 2.0);
      AllReduceOptions o;
      o.timeout = milliseconds(300);
      expect_failure_within<Timeout>([&] { pg.all_reduce(t, o)->wait(); }, 0.25, 2.3, "all_reduce, 300 ms timeout");
      mark_done(pg);
      return;
    }
    WorkPtr w = pg.all_reduce(t);
    expect_failure_within<Timeout>([&] { w->wait(milliseconds(200)); }, 0.15, 2.2, "Work::wait(200 ms)");
    EXPECT_FALSE(w->is_completed()) << "Work::wait's timeout leaves the op running";
    mark_done(pg);
    w->wait();
    EXPECT_EQ(t.item(), 2.0) << "the op finished after the waiter gave up once";
    wait_for_done(pg, {1});  // rank 1's last op times out waiting for this rank: stay until then
  });
}

// An op cut off by a later op's own timeout: #2 (1000 ms) waits behind #1 (the group's
// 8 s), and rank 1 issues neither. #2 times out with its own figures; #1, whose own deadline
// has not passed, fails as the group fails, quoting #2's timeout as the first failure (as
// gloo and mpi report it), and never as a 1000 ms timeout of its own.
TEST(ShmFailure, OpCutOffByALaterOpsTimeoutQuotesThatFailure) {
  GroupHarnessOptions options;
  options.op_timeout = milliseconds(8000);
  run_group(2, "shm", [](ProcessGroup& pg) {
    pg.barrier()->wait();  // #0
    if (pg.rank() == 1) {
      wait_for_done(pg, {0});  // issues nothing until rank 0 is through
      return;
    }
    Tensor a = Tensor::of<float>({1.0f});
    Tensor b = Tensor::of<float>({1.0f});
    WorkPtr first = pg.all_reduce(a);  // #1, the group's 8 s
    AllReduceOptions o;
    o.timeout = milliseconds(1000);
    WorkPtr second = pg.all_reduce(b, o);  // #2, queued behind #1
    const std::string late = expect_failure_within<Timeout>([&] { second->wait(); }, 0.9, 3, "all_reduce #2 (1000 ms)");
    expect_names(late, "all_reduce #2", "#2's error");
    expect_names(late, "timeout of 1000 ms", "#2's error");
    const std::string cut = expect_failure_within<Timeout>([&] { first->wait(); }, 0, 1, "all_reduce #1 (8000 ms)");
    expect_names(cut, "all_reduce #1", "#1's error");
    const size_t unusable = cut.find("the group is unusable since an earlier failure");
    EXPECT_NE(unusable, std::string::npos) << "#1 was cut off by the group's failure: " << cut;
    // The first failure it quotes is #2's timeout; #1's own part claims no 1000 ms timeout.
    const std::string quoted = unusable == std::string::npos ? "" : cut.substr(unusable);
    expect_names(quoted, "all_reduce #2", "the first failure #1 quotes");
    expect_names(quoted, "timeout of 1000 ms", "the first failure #1 quotes");
    EXPECT_EQ(cut.substr(0, std::min(unusable, cut.size())).find("1000 ms"), std::string::npos) << cut;
    EXPECT_EQ(cut.find("all_reduce #1 (float32[1] on cpu): did not finish"), std::string::npos) << cut;
    mark_done(pg);
  }, options);
}

TEST(ShmFailure, PeerDestroysTheGroupWhileThisRankIsInAnOp) {
  run_group(2, "shm", [](ProcessGroup& world) {
    ProcessGroupPtr pg = world.new_group({0, 1});
    if (pg->rank() == 0) {
      world.store()->wait({"test/in_op"}, milliseconds(30000));
      pg.reset();  // destroyed without joining rank 1's all_reduce
      return;
    }
    Tensor t = Tensor::zeros({10});
    WorkPtr w = pg->all_reduce(t);
    world.store()->set("test/in_op", "1");
    const std::string msg = expect_failure_within<PeerFailure>([&] { w->wait(); }, 0, 2, "all_reduce, peer gone");
    expect_names(msg, "rank 0 shut the group down", "the error");
  });
}

TEST(ShmFailure, AbortEndsAnOpInFlightAndTellsThePeers) {
  run_group(2, "shm", [](ProcessGroup& pg) {
    if (pg.rank() == 1) {
      wait_for_done(pg, {0});  // never joins rank 0's all_reduce
      const std::string msg = expect_failure_within<PeerFailure>([&] { pg.barrier()->wait(); }, 0, 1,
                                                                 "barrier after the peer aborted");
      expect_names(msg, "rank 0", "the error");
      return;
    }
    Tensor t = Tensor::zeros({10});
    WorkPtr w = pg.all_reduce(t);
    std::this_thread::sleep_for(milliseconds(100));  // let the op start (it waits for rank 1)
    const auto start = Clock::now();
    pg.abort();
    EXPECT_LT(seconds_since(start), 1.0) << "abort() must not wait for the op in flight";
    const std::string msg = expect_failure_within<PeerFailure>([&] { w->wait(); }, 0, 5, "the aborted all_reduce");  // not its 60 s timeout
    expect_names(msg, "shut down", "the error");
    mark_done(pg);
  });
}

// A callback of an op nobody waits on runs on the group's progress thread. Aborting or
// destroying the group there must end that thread without joining it from itself (which
// left it unjoined: std::terminate when the engine went).
enum class FromCallback { kAbort, kDestroy };

void end_group_from_a_callback(FromCallback how) {
  run_group(2, "shm", [how](ProcessGroup& world) {
    ProcessGroupPtr pg = world.new_group({0, 1});
    Tensor t = Tensor::empty({100});
    t.fill(1.0f);
    if (pg->rank() == 1) {
      world.store()->wait({"test/callback_set"}, milliseconds(30000));
      pg->all_reduce(t)->wait();
      return;
    }
    std::atomic<bool> ran{false};
    std::thread::id ran_on;
    auto holder = std::make_shared<ProcessGroupPtr>(pg);
    WorkPtr w = pg->all_reduce(t);  // waits for rank 1, which issues it only after this
    w->on_finish([&ran, &ran_on, holder, how](std::exception_ptr) {
      ran_on = std::this_thread::get_id();
      if (how == FromCallback::kAbort) {
        (*holder)->abort();
      } else {
        holder->reset();  // the last reference: the group is destroyed here
      }
      ran = true;
    });
    if (how == FromCallback::kDestroy) pg.reset();
    world.store()->set("test/callback_set", "1");
    const auto give_up = Clock::now() + std::chrono::seconds(20);
    while (!ran && Clock::now() < give_up) std::this_thread::sleep_for(milliseconds(1));  // nobody waits on w
    ASSERT_TRUE(ran) << "the all_reduce nobody waits on did not end";
    EXPECT_NE(ran_on, std::this_thread::get_id()) << "the callback should have run on the progress thread";
    EXPECT_TRUE(w->is_success());
    EXPECT_EQ(t.data_as<float>()[0], 2.0f);
    if (how == FromCallback::kAbort) {
      EXPECT_THROW(pg->barrier()->wait(), Error) << "an aborted group refuses later ops";
      pg.reset();
    }
    w.reset();  // the engine goes with its last Work
  });
}

TEST(ShmFailure, AbortFromACallbackOnTheProgressThread) { end_group_from_a_callback(FromCallback::kAbort); }

TEST(ShmFailure, DestroyFromACallbackOnTheProgressThread) { end_group_from_a_callback(FromCallback::kDestroy); }

TEST(ShmFailure, ReceiverLearnsThatItsSenderDied) {
  GroupHarnessOptions options;
  options.op_timeout = milliseconds(30000);
  options.run.may_be_killed = {1};
  run_group(2, "shm", [](ProcessGroup& pg) {
    Tensor t = Tensor::zeros({1000});
    if (pg.rank() == 1) {
      pg.send(t, 0)->wait();  // one message arrives...
      pg.store()->wait({"test/received"}, milliseconds(30000));
      ::raise(SIGKILL);  // ...the second never does
    }
    pg.recv(t, 1)->wait();
    pg.store()->set("test/received", "1");
    const std::string msg =
        expect_failure_within<PeerFailure>([&] { pg.recv(t, 1)->wait(); }, 0, 3, "recv from a rank that died");
    expect_names(msg, "rank 1", "the error");
  }, options);
}

// The failure shm keeps the group usable after: all_to_all split sizes that do not pair up,
// which every rank finds at the same round (an AgreedDesync). Each rank gets the Desync, and
// the group's next op runs (the core's note of a group's first failure leaves it out).
TEST(ShmFailure, SplitsThatDoNotPairFailEveryRankAndLeaveTheGroupUsable) {
  run_group(3, "shm", [](ProcessGroup& pg) {
    // 2 rows to every rank, except that rank 1 sends 3 rows to rank 0 and 1 to rank 2.
    std::vector<int64_t> sends = {2, 2, 2};
    if (pg.rank() == 1) sends = {3, 2, 1};
    const std::vector<int64_t> receives = {2, 2, 2};
    Tensor in = Tensor::zeros({6});
    Tensor out = Tensor::zeros({6});
    const std::string msg = expect_failure_within<Desync>(
        [&] { pg.all_to_all_single(out, in, receives, sends)->wait(); }, 0, 5, "all_to_all with splits that do not pair");
    expect_names(msg, "split sizes disagree", "the Desync");
    Tensor t = Tensor::of<float>({1.0f * pg.rank()});
    pg.all_reduce(t)->wait();
    EXPECT_EQ(t.item(0), 3.0) << "the group stays usable after an agreed Desync";
  });
}

}  // namespace
}  // namespace distcomm
