// A failure inside a subgroup names the ranks it blames in that subgroup's numbering, as
// every backend's own words do ("rank 1 closed its connection"), and also by world rank:
// a subgroup's rank 1 is rarely world rank 1, which is as often as not the rank reporting,
// and a reader goes to that rank's log (found by a review: subgroup errors named the dead
// peer by its subgroup rank only).
#include <signal.h>

#include <chrono>
#include <functional>
#include <regex>
#include <string>
#include <thread>

#include "api/errors.h"
#include "api/process/failure_origin.h"
#include "api/tensor.h"
#include "tests/backends/fault/fault_checks.h"
#include "tests/backends/fault/fault_suite.h"

namespace distcomm {
namespace fault {
namespace {

using testing::expect_failure_within;

// The subgroup is every rank but world rank 0, so that each member's subgroup rank is its
// world rank - 1; its last member dies. Rank 0 stays outside until the survivors are done
// (it may host the store).
TEST_P(FaultSuite, KilledInASubgroupIsNamedByItsWorldRank) {
  runner().run(
      [&](Rank& r) {
        ProcessGroupPtr pg = r.join();
        const int world_culprit = pg->size() - 1;
        const int culprit = world_culprit - 1;  // in the subgroup
        const std::vector<int> members = ranks_but(pg->size(), 0);
        ProcessGroupPtr sub = pg->new_group(members);
        std::vector<std::string> survivors_done;
        for (int m : members) {
          if (m != world_culprit) survivors_done.push_back("done/" + std::to_string(m));
        }
        if (!sub) {
          r.board().wait(survivors_done, std::chrono::duration_cast<std::chrono::milliseconds>(
                                             std::chrono::duration<double>(2 * kWithin)));
          return;
        }
        Tensor t = floats(1024);
        t.fill(1);
        sub->all_reduce(t)->wait();
        if (r.rank() == world_culprit) {
          note_time(r.board(), "died");
          ::raise(SIGKILL);
        }
        const std::string msg = expect_failure_within<PeerFailure>([&] { sub->all_reduce(t)->wait(); }, 0, kWithin,
                                                                   "a subgroup's all_reduce after a member died");
        expect_departure_named(msg, culprit, {"died", "closed", "exited"}, "the subgroup's all_reduce");
        // "rank 1 of this group is world rank 2" after the backend's words, or "rank 1
        // (world rank 2)" where the backend's words say it themselves.
        const std::string c = std::to_string(culprit), w = std::to_string(world_culprit);
        const std::regex world("rank " + c + " (of this group is world rank " + w + "\\b|\\(world rank " + w + "\\))");
        EXPECT_TRUE(std::regex_search(msg, world))
            << "rank " << r.rank() << ": should say that the subgroup's rank " << c << " is world rank " << w << ": "
            << msg;
        // What run_main tells the launcher (FailureReport::lost_rank): the world rank lost,
        // so that the launcher does not take this survivor for the cause.
        EXPECT_EQ(latest_group_failure_lost_rank(), world_culprit) << "rank " << r.rank() << ": " << msg;
        const std::string later = expect_failure_within<PeerFailure>([&] { sub->barrier()->wait(); }, 0, 0.5,
                                                                     "a later op of the subgroup, refused at once");
        EXPECT_TRUE(std::regex_search(later, world))
            << "rank " << r.rank() << ": the refusal quotes the first failure, world rank and all: " << later;
        r.board().set("done/" + std::to_string(r.rank()), std::string("1"));
      },
      {runner().ranks() - 1});
}

// "group 'world/g0' ranks [0, 1, 2] are world ranks [1, 2, 3]": the subgroup of every rank
// but 0, named `name`.
std::string map_of_all_but_zero(const std::string& name, int world_size) {
  std::vector<int> group, world;
  for (int r = 1; r < world_size; ++r) {
    group.push_back(r - 1);
    world.push_back(r);
  }
  return "group '" + name + "' ranks " + rank_list(group) + " are world ranks " + rank_list(world);
}

// In the subgroup of every rank but world rank 0, `culprit_op` runs on subgroup rank 1
// (world rank 2) and `others_op` on the rest; every other member must fail with E, whose
// words name ranks by the subgroup's numbers (where the others are, a Desync's table) and
// add the subgroup's map to world ranks. Rank 0 stays outside until they are done.
template <typename E>
void expect_subgroup_failure_with_map(Runner& runner, const std::function<void(ProcessGroup&)>& culprit_op,
                                      const std::function<void(ProcessGroup&)>& others_op, double earliest,
                                      const std::string& says) {
  runner.run([&](Rank& r) {
    ProcessGroupPtr pg = r.join();
    const std::vector<int> members = ranks_but(pg->size(), 0);
    ProcessGroupPtr sub = pg->new_group(members);
    std::vector<std::string> members_done;
    for (int m : members) members_done.push_back("done/" + std::to_string(m));
    if (!sub) {
      r.board().wait(members_done, std::chrono::duration_cast<std::chrono::milliseconds>(
                                       std::chrono::duration<double>(3 * kWithin)));
      return;
    }
    sub->barrier()->wait();
    if (sub->rank() == 1) {
      try {
        culprit_op(*sub);
      } catch (const Error&) {
        // Its own end of it (a Desync too, or the others' failure): the others' words are checked.
      }
      // Stays in the group until they are done: leaving would end their op otherwise.
      std::vector<std::string> others_done;
      for (int m : members) {
        if (m != r.rank()) others_done.push_back("done/" + std::to_string(m));
      }
      r.board().wait(others_done, std::chrono::duration_cast<std::chrono::milliseconds>(
                                      std::chrono::duration<double>(2 * kWithin)));
    } else {
      const std::string msg = expect_failure_within<E>([&] { others_op(*sub); }, earliest, kWithin,
                                                       "the subgroup's op that its rank 1 runs otherwise");
      expect_has(msg, says, "the failure, in the subgroup's numbers");
      expect_has(msg, map_of_all_but_zero(sub->name(), pg->size()), "the subgroup's map to world ranks");
    }
    r.board().set("done/" + std::to_string(r.rank()), std::string("1"));
  });
}

// Subgroup rank 1 skips all_reduce #1: the others' Timeout says "rank 1 has not issued #1".
TEST_P(FaultSuite, SkippedCollectiveInASubgroupMapsItsRanksToWorldRanks) {
  const double group_seconds = std::chrono::duration<double>(kGroupTimeout).count();
  expect_subgroup_failure_with_map<Timeout>(
      runner(), [](ProcessGroup&) {},
      [](ProcessGroup& sub) {
        Tensor t = floats(10);
        sub.all_reduce(t)->wait();
      },
      group_seconds - 0.5, "rank 1 has not issued #1");
}

// Subgroup rank 1 reduces 20 elements where the others reduce 10: a Desync whose table has
// "rank 1:" on a line of its own.
TEST_P(FaultSuite, DesyncInASubgroupMapsItsRanksToWorldRanks) {
  auto all_reduce_of = [](int64_t count) {
    return [count](ProcessGroup& sub) {
      Tensor t = floats(count);
      sub.all_reduce(t)->wait();
    };
  };
  expect_subgroup_failure_with_map<Desync>(runner(), all_reduce_of(20), all_reduce_of(10), 0,
                                           "all_reduce #1 float32[20] sum");
}

}  // namespace
}  // namespace fault
}  // namespace distcomm
