// A rank that dies while the others wait for it outside any op -- in the group's host
// exchange, through which ordered_print, split and DDP's replica check agree -- is named
// there as in an op: each survivor's call ends with a PeerFailure naming it soon after the
// group learns of the death, not at the group's timeout (30 s here; before, the survivors
// waited it out and then said only that rank 1 "did not post").
#include <signal.h>

#include <chrono>
#include <string>
#include <thread>

#include "api/errors.h"
#include "api/group/host_exchange.h"
#include "tests/backends/fault/fault_checks.h"
#include "tests/backends/fault/fault_suite.h"

namespace distcomm {
namespace fault {
namespace {

using testing::expect_failure_within;

constexpr int kCulprit = 1;
constexpr std::chrono::seconds kLongTimeout{30};
// The death named (kDeathNamedWithin), and one look of the exchange's (kGroupFailureCheck),
// with room for a loaded machine.
constexpr double kBound = 5.0;

TEST_P(FaultSuite, KilledWhileOthersWaitInAHostExchange) {
  const bool at_timeout = !differs("a death between ops is learnt at the next op").empty();
  runner().run(
      [&](Rank& r) {
        ProcessGroupPtr pg = r.join(at_timeout ? kGroupTimeout : kLongTimeout);
        pg->barrier()->wait();
        if (r.rank() == kCulprit) {
          std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the others into their waits
          ::raise(SIGKILL);
        }
        auto exchange = [&] { pg->exchange().all_gather("posted by rank " + std::to_string(r.rank())); };
        if (at_timeout) {
          const std::string msg = expect_failure_within<Timeout>(exchange, 0, kWithin, "a host exchange");
          expect_has(msg, "ranks [1] did not post within", "the host exchange");
          return;
        }
        const std::string msg =
            expect_failure_within<PeerFailure>(exchange, 0, kBound, "a host exchange that a rank died before posting to");
        expect_departure_named(msg, kCulprit, {"died", "closed", "exited"}, "the host exchange");
      },
      {kCulprit});
}

}  // namespace
}  // namespace fault
}  // namespace distcomm
