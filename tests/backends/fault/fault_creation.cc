// A rank whose backend fails after its part of the group's rendezvous is done (its
// connections made, its segments mapped): the others must learn that failure, the cause,
// not see its connections close or wait out a timeout. Found by CI on gloo (stop 55: rank 0
// reported "connection closed by peer" one run in ten); specified here for every backend.
#include <cstdlib>
#include <string>

#include "api/errors.h"
#include "tests/backends/fault/fault_checks.h"
#include "tests/backends/fault/fault_suite.h"

namespace distcomm {
namespace fault {
namespace {

using testing::expect_failure_within;
using testing::mark_done;
using testing::wait_for_done;

constexpr char kRefused[] = "DISTCOMM_STALL_REPORT_SECONDS='soon'";

// Rank 1's stall watch, which each backend makes once its rendezvous is done, refuses the
// variable that rank 1 alone set after init (init checks it, new_group's backends read it
// again). Rank 1's new_group fails with its own InvalidArgument; every other rank's
// new_group fails naming that refusal, or returns a group whose first op does.
TEST_P(FaultSuite, BackendFailsOnOneRankAfterItsRendezvous) {
  runner().run([](Rank& r) {
    ProcessGroupPtr pg = r.join();
    pg->barrier()->wait();
    std::vector<int> everyone;
    for (int i = 0; i < pg->size(); ++i) everyone.push_back(i);
    if (r.rank() == 1) {
      ::setenv("DISTCOMM_STALL_REPORT_SECONDS", "soon", 1);
      const std::string msg = expect_failure_within<InvalidArgument>([&] { pg->new_group(everyone); }, 0, kWithin,
                                                                     "rank 1's new_group");
      ::unsetenv("DISTCOMM_STALL_REPORT_SECONDS");
      expect_has(msg, kRefused, "rank 1's own refusal");
      mark_done(r.board(), 1);
      wait_for_done(r.board(), ranks_but(pg->size(), 1));
      return;
    }
    const std::string msg = expect_failure_within<Error>(
        [&] {
          ProcessGroupPtr sub = pg->new_group(everyone);
          Tensor t = floats(10);
          sub->all_reduce(t)->wait();
        },
        0, kWithin, "new_group, or its first op, with rank 1's backend refused");
    expect_has(msg, kRefused, "the cause, rank 1's refusal");
    mark_done(r.board(), r.rank());
    wait_for_done(r.board(), ranks_but(pg->size(), r.rank()));
  });
}

}  // namespace
}  // namespace fault
}  // namespace distcomm
