// Ranks that go: killed in the middle of a large op, or while the others wait for it after it
// forked a child that outlives it and holds every descriptor it had (as a data loader
// worker does), or leaving
// cleanly (the group destroyed, the process ended) while the others issue the next
// collective; rank 1, and rank 0, whose process serves the store. Every survivor must fail with PeerFailure naming
// the rank that went ("rank 1 died", "rank 1 closed its connection", "rank 0 shut the
// group down") within 1 s of its going, and every later op must fail at once.
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <regex>
#include <string>
#include <cstdint>
#include <cstring>
#include <thread>

#include "api/errors.h"
#include "tests/backends/fault/fault_checks.h"
#include "tests/backends/fault/fault_suite.h"
#include "tests/testing/lingering_child.h"

namespace distcomm {
namespace fault {
namespace {

using testing::expect_failure_within;

const std::vector<std::string> kDied = {"died", "closed", "exited"};
// A clean departure may also say that the rank shut the group down or left it.
const std::vector<std::string> kLeft = {"died", "closed", "exited", "shut", "left"};

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// A survivor's op fails with PeerFailure naming `culprit` in `words`, within the bound of
// its issue and within kDeathNamedWithin of the moment the culprit noted as `event` on the
// board (or of the op's issue, when that came later); then a later op fails at once.
void expect_survivor_told(Rank& r, ProcessGroup& pg, Tensor& t, int culprit, const std::vector<std::string>& words,
                          const std::string& event, const char* what) {
  const auto issued = Clock::now();
  const std::string msg = expect_failure_within<PeerFailure>([&] { pg.all_reduce(t)->wait(); }, 0, kWithin, what);
  const auto failed = Clock::now();
  expect_departure_named(msg, culprit, words, what);
  const auto gone = std::max(noted_time(r.board(), event), issued);
  EXPECT_LE(seconds_between(gone, failed), kDeathNamedWithin)
      << what << ": rank " << culprit << " named " << seconds_between(gone, failed) << " s after it " << event;
  const std::string later =
      expect_failure_within<PeerFailure>([&] { pg.barrier()->wait(); }, 0, 0.5, "a later op, refused at once");
  expect_departure_named(later, culprit, words, "a later op");
}

// Where the backend lets a survivor finish an op whose part it had done before `culprit`
// died (differs "a rank past its part finishes"): the op either fails as
// expect_survivor_told says (PeerFailure naming the culprit, within the bound of its issue
// and within kDeathNamedWithin of the death), or ends with every element right (the dead
// rank's data had arrived); either way the survivor's next collective then fails naming
// the culprit, within kDeathNamedWithin of the death.
void expect_survivor_told_or_finished(Rank& r, ProcessGroup& pg, Tensor& t, int culprit, const char* what) {
  const auto issued = Clock::now();
  WorkPtr work = pg.all_reduce(t);
  std::string failure;
  bool finished = false;
  try {
    work->wait();
    finished = true;
  } catch (const PeerFailure& e) {
    failure = e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": failed with another error than PeerFailure: " << e.what();
    return;
  }
  const auto ended = Clock::now();
  EXPECT_LE(seconds_between(issued, ended), kWithin) << what << ": took this long to end";
  if (!finished) {
    expect_departure_named(failure, culprit, kDied, what);
    const auto died = std::max(noted_time(r.board(), "died"), issued);
    EXPECT_LE(seconds_between(died, ended), kDeathNamedWithin)
        << what << ": rank " << culprit << " named " << seconds_between(died, ended) << " s after it died";
  } else {
    // Read in place (a copy of 64 MiB would cost this rank more time than the bounds allow).
    const float* values = t.data_as<float>();
    const float* end = values + t.numel();
    const float size = static_cast<float>(pg.size());
    const float* wrong = std::find_if(values, end, [size](float v) { return v != size; });
    EXPECT_EQ(wrong, end) << what << ": ended well on rank " << r.rank() << " with element " << (wrong - values)
                          << " = " << (wrong == end ? 0.0f : *wrong);
  }
  const std::string later = expect_failure_within<PeerFailure>([&] { pg.barrier()->wait(); }, 0, kWithin,
                                                               "the next op of a survivor");
  expect_departure_named(later, culprit, kDied, "the next op");
  const auto died = noted_time(r.board(), "died");
  EXPECT_LE(seconds_between(died, Clock::now()), kDeathNamedWithin)
      << "the next op: rank " << culprit << " named " << seconds_between(died, Clock::now()) << " s after it died";
}

// A survivor's group, failed because `culprit` died, is destroyed within kDeathNamedWithin:
// nothing of its end waits on the dead rank (on the store it served, say).
void expect_quick_exit(Rank& r, ProcessGroupPtr& pg, int culprit) {
  const auto leaving = Clock::now();
  r.leave(pg);
  EXPECT_LE(seconds_between(leaving, Clock::now()), kDeathNamedWithin)
      << "destroying the group after rank " << culprit << " died took this long";
}

// Waits until the op in flight has written into t (an element other than its initial 1:
// a peer's data has arrived), notes the time and dies by SIGKILL: in the middle of the op.
void die_once_the_op_is_under_way(Rank& r, const Tensor& t, const WorkPtr& work) {
  const auto* words = static_cast<const uint32_t*>(t.data());
  const float one = 1.0f;
  uint32_t one_bits;
  std::memcpy(&one_bits, &one, sizeof one);
  const int64_t stride = std::max<int64_t>(1, t.numel() / 64);
  const auto give_up = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(kWithin));
  while (Clock::now() < give_up) {
    for (int64_t i = 0; i < t.numel(); i += stride) {
      // Read while the backend writes: atomically, as the race is the point.
      if (__atomic_load_n(words + i, __ATOMIC_RELAXED) != one_bits) {
        note_time(r.board(), "died");
        ::raise(SIGKILL);
      }
    }
    // Also hands the op to a backend that runs only what someone waits on or polls.
    if (work->is_completed()) break;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  ADD_FAILURE() << "rank " << r.rank() << "'s all_reduce never got under way before it " << (work->is_completed() ? "ended" : "gave up");
}

// How long the forked child lives on after its parent died: longer than a death may take to
// be named, so that a survivor that learns of it only when the child's copies of the
// descriptors close fails the bound.
constexpr double kChildOutlivesParent = 3 * kDeathNamedWithin;

// A child that holds every descriptor of this process (sockets, memfds, pipes) until
// kChildOutlivesParent after this process has died.
void fork_a_lingering_child() {
  ASSERT_GE(testing::fork_a_child_that_lingers(std::chrono::seconds(static_cast<int>(kChildOutlivesParent))), 0)
      << "fork failed";
}

// Rank `culprit` is SIGKILLed half-way through a 64 MiB all_reduce.
void killed_in_a_large_op(Runner& runner, int culprit, bool past_part_finishes) {
  runner.run(
      [culprit, past_part_finishes](Rank& r) {
        constexpr int64_t kCount = 16 << 20;  // 64 MiB of float32
        ProcessGroupPtr pg = r.join();
        Tensor t = floats(kCount);
        t.fill(1);
        pg->barrier()->wait();
        if (r.rank() == culprit) {
          die_once_the_op_is_under_way(r, t, pg->all_reduce(t));
          return;
        }
        if (past_part_finishes) {
          expect_survivor_told_or_finished(r, *pg, t, culprit, "the all_reduce a rank died in");
        } else {
          expect_survivor_told(r, *pg, t, culprit, kDied, "died", "the all_reduce a rank died in");
        }
        expect_quick_exit(r, pg, culprit);
      },
      {culprit});
}

// Rank `culprit` forks a child that outlives it, then is SIGKILLed while the others wait
// for it in an all_reduce it has not issued. (It dies before its own issue: a rank killed
// "in the middle" of an op may, on a busy host, have posted all its data by then, and the
// others rightly finish; this case is about what holds a dead rank's descriptors.)
void killed_with_a_forked_child_alive(Runner& runner, int culprit) {
  runner.run(
      [culprit](Rank& r) {
        ProcessGroupPtr pg = r.join();
        Tensor t = floats(1 << 20);
        t.fill(1);
        pg->barrier()->wait();
        if (r.rank() == culprit) {
          fork_a_lingering_child();
          std::vector<std::string> issued;
          for (int p : ranks_but(pg->size(), culprit)) issued.push_back("issuing/" + std::to_string(p));
          r.board().wait(issued, std::chrono::duration_cast<std::chrono::milliseconds>(kGroupTimeout));
          std::this_thread::sleep_for(std::chrono::milliseconds(50));  // into their waits
          note_time(r.board(), "died");
          ::raise(SIGKILL);
        }
        r.board().set("issuing/" + std::to_string(r.rank()), std::string("1"));
        expect_survivor_told(r, *pg, t, culprit, kDied, "died", "the all_reduce a rank died before");
        // Nor does the child hold up the end: a store call meets a closed connection, not
        // one that neither answers nor closes (when the dead rank served the store).
        expect_quick_exit(r, pg, culprit);
      },
      {culprit});
}

TEST_P(FaultSuite, KilledInALargeOp) {
  killed_in_a_large_op(runner(), 1, !differs("a rank past its part finishes").empty());
}

TEST_P(FaultSuite, StoreHostKilledInALargeOp) {
  killed_in_a_large_op(runner(), 0, !differs("a rank past its part finishes").empty());
}

TEST_P(FaultSuite, KilledWithAForkedChildAlive) { killed_with_a_forked_child_alive(runner(), 1); }

TEST_P(FaultSuite, StoreHostKilledWithAForkedChildAlive) { killed_with_a_forked_child_alive(runner(), 0); }

// Whether the message names group rank `r` as one that went: "rank 1 (pid", "rank 1
// closed", or in a list "ranks [1, 2]" (not "rank 1/4", a rank's own prefix).
bool names_rank(const std::string& message, int r) {
  const std::string n = std::to_string(r);
  return std::regex_search(message, std::regex("\\brank " + n + "(?![/0-9])|\\branks \\[([0-9]+, )*" + n + "\\b"));
}

// Ranks 1 and 2 are SIGKILLed together (a host that goes down, the OOM killer), and are
// both dead before the survivors issue an all_reduce: every survivor's PeerFailure names
// both, so that a program that goes on without them (ProcessGroup::shrink) leaves both
// out (helper-68: shm named one, and the shrink waited out its timeout for the other;
// gloo named the first connection it saw close).
TEST_P(FaultSuite, TwoKilledTogetherAreBothNamed) {
  const bool first_group_only = !differs("names the loss its first failed group saw").empty();
  runner().run(
      [&](Rank& r) {
        ProcessGroupPtr pg = r.join();
        Tensor t = floats(64);
        pg->barrier()->wait();
        const auto bound = std::chrono::duration_cast<std::chrono::milliseconds>(kGroupTimeout);
        if (r.rank() == 1 || r.rank() == 2) {
          r.board().set("pid/" + std::to_string(r.rank()), std::to_string(::getpid()));
          r.board().wait({"pid/1", "pid/2"}, bound);  // both about to die
          ::raise(SIGKILL);
        }
        std::map<int, int> pids;
        for (int victim : {1, 2}) {
          r.board().wait({"pid/" + std::to_string(victim)}, bound);
          const int pid = std::stoi(r.board().get_string("pid/" + std::to_string(victim)));
          ASSERT_TRUE(testing::process_ends_within(pid, bound)) << "rank " << victim << " did not die";
          pids[victim] = pid;
        }
        const std::string msg = testing::expect_failure_within<PeerFailure>(
            [&] { pg->all_reduce(t)->wait(); }, 0, kWithin, "an all_reduce after ranks 1 and 2 died");
        if (first_group_only) {
          EXPECT_TRUE(names_rank(msg, 1) || names_rank(msg, 2)) << "rank " << r.rank() << ": " << msg;
          return;
        }
        EXPECT_TRUE(names_rank(msg, 1)) << "rank " << r.rank() << " should name rank 1: " << msg;
        EXPECT_TRUE(names_rank(msg, 2)) << "rank " << r.rank() << " should name rank 2: " << msg;
        // Where the message also says where the others are (the stall watch's explanation of
        // closed connections: shm; gloo's watch of its peers' pids names the deaths itself), a
        // silent rank of this host is named by what its process did, not with the guesses.
        if (msg.find("did not report") != std::string::npos) {
          for (int victim : {1, 2}) {
            const std::string pid = std::to_string(pids[victim]);
            expect_has(msg,
                       "rank " + std::to_string(victim) + " did not report: its process " + pid +
                           " on this host has ended (pid " + pid + " is",
                       "the explanation of rank " + std::to_string(victim) + "'s silence");
          }
        }
      },
      {1, 2});
}

// Rank 1 is killed the moment its group is made, before any op. Where the others' error says
// where a silent rank is (shm's explanation of a closed connection), rank 1 is named by what
// its process did: it published where it runs before the group was handed over (its stall
// watch's constructor), not in its watch thread's first look, which a rank killed this early
// had not made (then: "rank 1 did not report (busy outside distcomm, ... gone ...)").
TEST_P(FaultSuite, KilledRightAfterItsGroupWasMadeIsNamedByItsProcess) {
  runner().run(
      [&](Rank& r) {
        if (r.rank() == 1) r.board().set("pid/1", std::to_string(::getpid()));
        ProcessGroupPtr pg = r.join();
        if (r.rank() == 1) ::raise(SIGKILL);
        Tensor t = floats(16);
        const auto bound = std::chrono::duration_cast<std::chrono::milliseconds>(kGroupTimeout);
        r.board().wait({"pid/1"}, bound);
        const std::string pid = r.board().get_string("pid/1");
        ASSERT_TRUE(testing::process_ends_within(std::stoi(pid), bound)) << "rank 1 did not die";
        const std::string msg = expect_failure_within<PeerFailure>([&] { pg->all_reduce(t)->wait(); }, 0, kWithin,
                                                                   "an all_reduce after rank 1 died at once");
        EXPECT_TRUE(names_rank(msg, 1)) << "rank " << r.rank() << ": " << msg;
        if (msg.find("did not report") != std::string::npos) {
          expect_has(msg, "rank 1 did not report: its process " + pid + " on this host has ended (pid " + pid + " is",
                     "the explanation of rank 1's silence");
        }
      },
      {1});
}

// Rank `culprit` destroys its group after a barrier and ends, while the others issue
// all_reduce #1.
void exits_cleanly(Runner& runner, int culprit, bool departure_is_a_timeout) {
  runner.run([&](Rank& r) {
    ProcessGroupPtr pg = r.join();
    pg->barrier()->wait();
    if (r.rank() == culprit) {
      r.leave(pg);
      note_time(r.board(), "left");
      return;
    }
    Tensor t = floats(10);
    if (departure_is_a_timeout) {
      const double group_seconds = std::chrono::duration<double>(kGroupTimeout).count();
      const std::string msg = expect_failure_within<Timeout>([&] { pg->all_reduce(t)->wait(); }, group_seconds - 0.5,
                                                             kWithin, "the all_reduce after a rank left");
      expect_departure_named(msg, culprit, {"left", "issued"}, "the Timeout");
      return;
    }
    expect_survivor_told(r, *pg, t, culprit, kLeft, "left", "the all_reduce after a rank left");
  });
}

// Rank 0 waits in a recv from rank 1; ranks 2 and up destroy their groups and end (nothing
// in flight: an orderly leave), then rank 1 is SIGKILLed. The recv fails naming rank 1, within
// kDeathNamedWithin of its death, and not the ranks that left, which had no part in it
// (gloo said "rank 2 closed the group with no op in flight while this op still waited for
// it", rank 1's death taken for a consequence of that departure).
TEST_P(FaultSuite, RecvFromAKilledRankAfterAnotherLeft) {
  runner().run(
      [&](Rank& r) {
        ProcessGroupPtr pg = r.join();
        pg->barrier()->wait();
        const auto bound = std::chrono::duration_cast<std::chrono::milliseconds>(kGroupTimeout);
        if (r.rank() >= 2) {
          r.board().wait({"recv posted"}, bound);
          r.leave(pg);
          r.board().set("left/" + std::to_string(r.rank()), "1");
          return;
        }
        if (r.rank() == 1) {
          std::vector<std::string> left;
          for (int k = 2; k < pg->size(); ++k) left.push_back("left/" + std::to_string(k));
          r.board().wait(left, bound);
          std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the departures seen
          note_time(r.board(), "died");
          ::raise(SIGKILL);
        }
        Tensor t = floats(4);
        WorkPtr recv = pg->recv(t, 1);
        r.board().set("recv posted", "1");
        const std::string msg =
            expect_failure_within<PeerFailure>([&] { recv->wait(); }, 0, kWithin, "a recv from a rank killed");
        const auto failed = Clock::now();
        expect_departure_named(msg, 1, kDied, "the recv from rank 1");
        for (int k = 2; k < pg->size(); ++k) {
          EXPECT_FALSE(names_rank(msg, k)) << "rank " << k << " left cleanly and had no part in the recv: " << msg;
        }
        EXPECT_LE(seconds_between(noted_time(r.board(), "died"), failed), kDeathNamedWithin) << msg;
      },
      {1});
}

TEST_P(FaultSuite, ExitsCleanlyMidJob) { exits_cleanly(runner(), 1, !differs("a departure is a timeout").empty()); }

TEST_P(FaultSuite, StoreHostExitsCleanlyMidJob) {
  exits_cleanly(runner(), 0, !differs("a departure is a timeout").empty());
}

}  // namespace
}  // namespace fault
}  // namespace distcomm
