// A gloo peer killed in the middle of an op: every survivor fails with a PeerFailure that
// names the dead rank, within a second of the kill, whatever the op's timeout -- also when
// the survivor is in the middle of receiving a message from it (gloo wakes a connection's
// pending operations when it closes, but not a receive already under way).
//
// The victim is stopped (SIGSTOP) at the point under test, so that where it is does not
// depend on timing, and then killed (SIGKILL) by a survivor, which notes the time of the kill
// on the store; every survivor measures from that time to its failure.
//
// To see where an op is, rank 0 reads its tensor while the op writes it (through volatile
// pointers, one element at a time): a race by the letter of C++ that ThreadSanitizer
// reports, and the only view of a message under way that gloo gives.
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "api/errors.h"
#include "tests/testing/failure_checks.h"
#include "tests/testing/lingering_child.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace {

using std::chrono::milliseconds;
using testing::Clock;
using testing::GroupHarnessOptions;
using testing::run_group;

constexpr int kVictim = 1;
// What a survivor must say about the killed rank (docs/failures.md, "When a job fails").
const char kNamed[] = "rank 1 closed its connection (the process died or exited)";
// The requirement: a killed rank is named on every survivor within 1 s of its death.
constexpr double kNamedWithinSeconds = 1.0;

Tensor filled(int64_t count, double value) {
  Tensor t = Tensor::zeros({count});
  t.fill(value);
  return t;
}

int64_t now_ns() { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count(); }

// The state letter in /proc/<pid>/stat: 'T' once the process is stopped.
char process_state(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const size_t paren = line.rfind(')');  // the command name may hold spaces
  return paren == std::string::npos || paren + 2 >= line.size() ? '?' : line[paren + 2];
}

void publish_pid(ProcessGroup& pg) { pg.store()->set("test/pid", std::to_string(::getpid())); }

pid_t victim_pid(ProcessGroup& pg) {
  pg.store()->wait({"test/pid"}, milliseconds(60000));
  return static_cast<pid_t>(std::stol(pg.store()->get_string("test/pid")));
}

// A handshake with the kernel, not a sleep: returns once the victim is stopped.
void wait_until_stopped(pid_t pid) {
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (process_state(pid) != 'T') {
    ASSERT_LT(Clock::now(), deadline) << "rank " << kVictim << " (pid " << pid << ") did not stop";
    std::this_thread::sleep_for(milliseconds(1));
  }
}

// Kills the (stopped) victim and leaves the time of the kill on the store.
void kill_victim(ProcessGroup& pg, pid_t pid) {
  pg.store()->set("test/killed_at", std::to_string(now_ns()));
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
}

// Runs op on a survivor: it must fail with a PeerFailure naming the victim within
// kNamedWithinSeconds of the kill. Each survivor prints its time, for the spread over runs.
void expect_victim_named(ProcessGroup& pg, const std::function<void()>& op, const char* what) {
  std::string message;
  int64_t failed_at = 0;
  try {
    op();
    ADD_FAILURE() << what << ": succeeded although rank " << kVictim << " was killed";
    return;
  } catch (const PeerFailure& e) {
    failed_at = now_ns();
    message = e.what();
  } catch (const std::exception& e) {
    failed_at = now_ns();
    ADD_FAILURE() << what << ": expected a PeerFailure, got: " << e.what();
  }
  pg.store()->wait({"test/killed_at"}, milliseconds(60000));
  const double after_kill = (failed_at - std::stoll(pg.store()->get_string("test/killed_at"))) / 1e9;
  std::fprintf(stderr, "[rank %d] %s failed %.3f s after the kill: %s\n", pg.rank(), what, after_kill,
               message.c_str());
  EXPECT_GE(after_kill, 0.0) << what << " failed before the kill: " << message;
  EXPECT_LT(after_kill, kNamedWithinSeconds) << what << ": " << message;
  EXPECT_NE(message.find(kNamed), std::string::npos) << what << " must name the dead rank: " << message;
}

GroupHarnessOptions three_ranks_victim_killed(milliseconds op_timeout) {
  GroupHarnessOptions options;
  options.op_timeout = op_timeout;
  options.run.may_be_killed = {kVictim};
  return options;
}

// The survivors are inside all_reduce #2, waiting for the victim, when it dies. The op's
// timeout must not matter: the dead connection is noticed, not waited out.
class GlooKilledPeer : public ::testing::TestWithParam<int> {};

TEST_P(GlooKilledPeer, EverySurvivorNamesItWithinASecond) {
  run_group(3, "gloo", [](ProcessGroup& pg) {
    Tensor t = filled(1 << 16, 1.0);
    for (int i = 0; i < 2; ++i) pg.all_reduce(t)->wait();
    if (pg.rank() == kVictim) {
      publish_pid(pg);
      pg.all_reduce(t);  // issued, and left to the worker after its grace: the stop comes first
      ::raise(SIGSTOP);
      return;  // not reached: rank 0 kills this process while it is stopped
    }
    if (pg.rank() == 0) {
      WorkPtr w = pg.all_reduce(t);
      const pid_t victim = victim_pid(pg);
      wait_until_stopped(victim);
      kill_victim(pg, victim);
      expect_victim_named(pg, [&] { w->wait(); }, "all_reduce #2");
    } else {
      expect_victim_named(pg, [&] { pg.all_reduce(t)->wait(); }, "all_reduce #2");
    }
    testing::mark_done(pg);
    // The group stays open until both survivors are through: a survivor that closed it
    // first would be a second cause for the other.
    testing::wait_for_done(pg, {0, 2});
  }, three_ranks_victim_killed(milliseconds(GetParam())));
}

INSTANTIATE_TEST_SUITE_P(OpTimeouts, GlooKilledPeer, ::testing::Values(5000, 20000, 60000),
                         [](const ::testing::TestParamInfo<int>& p) { return std::to_string(p.param / 1000) + "s"; });

// The victim is stopped in the middle of a 64 MiB all_reduce (a ring of 1 MiB segments):
// its neighbours may be in the middle of a message to or from it when it dies.
TEST(GlooKilledPeerMidMessage, LargeAllReduce) {
  run_group(3, "gloo", [](ProcessGroup& pg) {
    constexpr int64_t kCount = 16 << 20;  // 64 MiB of float32
    Tensor t = filled(kCount, 1.0 + pg.rank());
    pg.barrier()->wait();
    if (pg.rank() == kVictim) {
      publish_pid(pg);
      pg.all_reduce(t)->wait();  // stopped and killed inside
      return;
    }
    if (pg.rank() == 0) {
      WorkPtr w = pg.all_reduce(t);
      const pid_t victim = victim_pid(pg);
      // The op is under way once a segment of this rank's tensor holds a partial sum.
      const auto* data = static_cast<const volatile float*>(t.data());
      auto started = [&] {
        for (int64_t i = 0; i < kCount; i += 1 << 18) {
          if (data[i] != 1.0f) return true;
        }
        return false;
      };
      const auto deadline = Clock::now() + std::chrono::seconds(30);
      while (!started() && !w->is_completed() && Clock::now() < deadline) std::this_thread::yield();
      ASSERT_FALSE(w->is_completed()) << "the all_reduce ended before rank " << kVictim << " could be stopped in it";
      ASSERT_EQ(::kill(victim, SIGSTOP), 0);
      wait_until_stopped(victim);
      kill_victim(pg, victim);
      expect_victim_named(pg, [&] { w->wait(); }, "64 MiB all_reduce");
    } else {
      expect_victim_named(pg, [&] { pg.all_reduce(t)->wait(); }, "64 MiB all_reduce");
    }
    testing::mark_done(pg);
    testing::wait_for_done(pg, {0, 2});
  }, three_ranks_victim_killed(milliseconds(60000)));
}

// The tests below are deterministic: rank 0 stops the victim once the first bytes of a
// 64 MiB message from it have landed in its tensor, so that its receive is under way when
// the victim dies, and afterwards the tensor shows that it was (its first element written,
// its last not). gloo's own wake-up on a closed connection misses exactly such a receive.
// Should the whole message have arrived before the stop took effect (a loaded machine may
// not run rank 0 for that long), the victim is let go on and the round is repeated.
constexpr int64_t kBigCount = 16 << 20;  // 64 MiB of float32
constexpr float kVictimValue = 7.0f;
constexpr int kRounds = 5;

// Rank 0's side of a round: `in` (zeros) receives the victim's message through `op`.
// Returns true when the victim is stopped with the message under way (then it is to be
// killed); false when the message came whole first (the victim runs on, op has ended).
bool stopped_mid_message(pid_t victim, const Tensor& in, const WorkPtr& op, int round) {
  const auto* data = static_cast<const volatile float*>(in.data());
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (data[0] == 0.0f && !op->is_completed() && Clock::now() < deadline) {
  }
  EXPECT_EQ(::kill(victim, SIGSTOP), 0);
  wait_until_stopped(victim);
  if (!op->is_completed()) return true;
  std::fprintf(stderr, "round %d: the message arrived whole before the stop; again\n", round);
  EXPECT_EQ(::kill(victim, SIGCONT), 0);
  op->wait();
  return false;
}

// After the failure: the receive had started and not ended when the victim died.
void expect_cut_off_mid_message(const Tensor& in) {
  EXPECT_EQ(in.item(0), kVictimValue) << "the receive had started";
  EXPECT_EQ(in.item(kBigCount - 1), 0.0) << "and had not ended: the test provoked what it is about";
}

// A collective: gloo's broadcast receives straight into the tensor, on the thread that
// runs the op, inside gloo's algorithm.
TEST(GlooKilledPeerMidMessage, BroadcastReceiveUnderWay) {
  run_group(3, "gloo", [](ProcessGroup& pg) {
    BroadcastOptions from_victim;
    from_victim.root = kVictim;
    if (pg.rank() == kVictim) {
      publish_pid(pg);
      Tensor big = filled(kBigCount, kVictimValue);
      for (int round = 0; round < kRounds; ++round) pg.broadcast(big, from_victim)->wait();  // killed in one
      return;
    }
    if (pg.rank() == 2) {
      // Its own message may have come whole before the stop; then its next round fails.
      // One tensor for every round: a fresh 64 MiB between rounds would add its page
      // faults to the time measured.
      Tensor in = Tensor::zeros({kBigCount});
      expect_victim_named(pg, [&] {
        for (int round = 0; round < kRounds; ++round) pg.broadcast(in, from_victim)->wait();
      }, "broadcast from the victim");
      testing::mark_done(pg);
      testing::wait_for_done(pg, {0});
      return;
    }
    const pid_t victim = victim_pid(pg);
    for (int round = 0; round < kRounds; ++round) {
      Tensor in = Tensor::zeros({kBigCount});
      WorkPtr op = pg.broadcast(in, from_victim);
      if (!stopped_mid_message(victim, in, op, round)) continue;
      kill_victim(pg, victim);
      expect_victim_named(pg, [&] { op->wait(); }, "broadcast of 64 MiB under way");
      expect_cut_off_mid_message(in);
      testing::mark_done(pg);
      testing::wait_for_done(pg, {2});
      return;
    }
    FAIL() << "in " << kRounds << " rounds the victim never stopped before its message had arrived whole";
  }, three_ranks_victim_killed(milliseconds(60000)));
}

// A recv, and a bystander with nothing in flight: rank 2 must learn of the death by itself
// (its connection to the victim closed), not through rank 0, so its op after rank 0 is
// through fails at once naming the victim.
TEST(GlooKilledPeerMidMessage, RecvUnderWayAndAnIdleRank) {
  run_group(3, "gloo", [](ProcessGroup& pg) {
    if (pg.rank() == kVictim) {
      publish_pid(pg);
      Tensor big = filled(kBigCount, kVictimValue);
      for (int round = 0; round < kRounds; ++round) {
        P2POptions o;
        o.tag = round;
        pg.send(big, 0, o)->wait();  // killed in one of these
      }
      return;
    }
    if (pg.rank() == 2) {
      testing::wait_for_done(pg, {0});
      expect_victim_named(pg, [&] { pg.barrier()->wait(); }, "barrier on the idle rank");
      return;
    }
    const pid_t victim = victim_pid(pg);
    for (int round = 0; round < kRounds; ++round) {
      Tensor in = Tensor::zeros({kBigCount});
      P2POptions o;
      o.tag = round;
      WorkPtr recv = pg.recv(in, kVictim, o);
      if (!stopped_mid_message(victim, in, recv, round)) continue;
      kill_victim(pg, victim);
      expect_victim_named(pg, [&] { recv->wait(); }, "recv of 64 MiB under way");
      expect_cut_off_mid_message(in);
      testing::mark_done(pg);
      return;
    }
    testing::mark_done(pg);
    FAIL() << "in " << kRounds << " rounds the victim never stopped before its message had arrived whole";
  }, three_ranks_victim_killed(milliseconds(60000)));
}

// A peer given another DISTCOMM_HOST_ID is on another host to this rank, whatever the
// kernel says (docs/environment.md): containers that share a kernel, or network namespaces
// that share the boot id and the PID namespace (tools/netns_hosts.sh). Its pid names a
// process here, but what that process does is not this rank's to see: it is judged as a
// peer on another machine is, by its connections and the group's timeouts.
//
// The victim ("host b") forks a child that holds its connections open -- as a link cut
// between two such hosts does: no packet says anything, no connection closes -- and is
// then SIGKILLed. The survivors ("host a") must not name a death that the network did not
// show them: they wait out the op's timeout and say so. (An outside tester's elastic run
// over network namespaces, link cut: the launcher of host 0 stopped its ranks when host 1's
// heartbeats stopped, and host 1's ranks said at once "ranks [0, 1] closed their
// connections (the processes died or exited)", once "rank 1 (pid 9109) died: its process
// ended while a process it forked still holds its connections open" of a rank that forked
// nothing: each had watched the other host's processes through pidfds.)
constexpr milliseconds kOtherHostOpTimeout{2000};

// A child that holds every descriptor of this process until `linger` after this process
// has died.
void fork_a_child_holding_the_connections(std::chrono::seconds linger) {
  ASSERT_GE(testing::fork_a_child_that_lingers(linger), 0) << "fork failed";
}

TEST(GlooPeerOnAnotherHost, ItsProcessIsNotWatchedFromHere) {
  GroupHarnessOptions options = three_ranks_victim_killed(kOtherHostOpTimeout);
  options.run.may_be_killed = {2};
  options.host_ids = {"host-a", "host-a", "host-b"};
  run_group(3, "gloo", [](ProcessGroup& pg) {
    Tensor t = filled(64, 1.0);
    pg.all_reduce(t)->wait();
    if (pg.rank() == 2) {
      // Longer than the survivors' op timeout: they must not learn of it from the child's end.
      fork_a_child_holding_the_connections(std::chrono::seconds(4 * kOtherHostOpTimeout.count() / 1000));
      pg.store()->set("test/dying", "1");
      ::raise(SIGKILL);
    }
    pg.store()->wait({"test/dying"}, milliseconds(60000));
    std::this_thread::sleep_for(milliseconds(100));  // dead by now, as a pidfd would show
    const auto start = Clock::now();
    std::string message;
    try {
      pg.all_reduce(t)->wait();
      ADD_FAILURE() << "the all_reduce finished without rank 2";
    } catch (const Timeout& e) {
      message = e.what();
    } catch (const std::exception& e) {
      message = e.what();
      ADD_FAILURE() << "rank 2 is on another host: the survivors cannot see its process, only that it does not "
                       "answer (a Timeout); got: "
                    << message;
    }
    const double after = std::chrono::duration<double>(Clock::now() - start).count();
    std::fprintf(stderr, "[rank %d] failed after %.3f s: %s\n", pg.rank(), after, message.c_str());
    EXPECT_EQ(message.find("died"), std::string::npos) << message;
    EXPECT_EQ(message.find("closed"), std::string::npos) << message;
    EXPECT_GE(after, 0.75 * kOtherHostOpTimeout.count() / 1000.0) << "failed before the op's timeout: " << message;
    testing::mark_done(pg);
    testing::wait_for_done(pg, {0, 1});
  }, options);
}

}  // namespace
}  // namespace distcomm
