// A failure inside a subgroup names the ranks it blames in that subgroup's numbering, as
// every backend's own words do ("rank 1 closed its connection"), and also by world rank:
// a subgroup's rank 1 is rarely world rank 1, which is as often as not the rank reporting,
// and a reader goes to that rank's log (found by a review: subgroup errors named the dead
// peer by its subgroup rank only).
#include <signal.h>

#include <chrono>
#include <regex>
#include <string>
#include <thread>

#include "api/errors.h"
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
        const std::string later = expect_failure_within<PeerFailure>([&] { sub->barrier()->wait(); }, 0, 0.5,
                                                                     "a later op of the subgroup, refused at once");
        EXPECT_TRUE(std::regex_search(later, world))
            << "rank " << r.rank() << ": the refusal quotes the first failure, world rank and all: " << later;
        r.board().set("done/" + std::to_string(r.rank()), std::string("1"));
      },
      {runner().ranks() - 1});
}

}  // namespace
}  // namespace fault
}  // namespace distcomm
