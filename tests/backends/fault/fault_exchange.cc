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
#include "api/tensor.h"
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

// The same death while the others split the group: split's exchange fails as above, and the
// error also says which call of the program's was waiting (before: only "host message
// exchange #0", found by a review).
TEST_P(FaultSuite, KilledWhileOthersSplit) {
  runner().run(
      [&](Rank& r) {
        ProcessGroupPtr pg = r.join(kLongTimeout);
        pg->barrier()->wait();
        if (r.rank() == kCulprit) {
          std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the others into their waits
          ::raise(SIGKILL);
        }
        const std::string msg = expect_failure_within<PeerFailure>([&] { pg->split(0, r.rank()); }, 0, kBound,
                                                                   "a split that a rank died before joining");
        expect_has(msg, "split #0 on group 'world': ", "the split");
        expect_departure_named(msg, kCulprit, {"died", "closed", "exited"}, "the split");
      },
      {kCulprit});
}

// The same death before new_group, which meets its members through the parent's store
// (member_lists.h) rather than its exchange: the survivors' new_group of every rank ends
// with a PeerFailure naming the dead rank once the parent group knows of it, not at the
// timeout (30 s here; before, they waited it out and then said that rank 1 "has not called
// init_process_group (or new_group) yet").
TEST_P(FaultSuite, KilledWhileOthersCreateASubgroup) {
  runner().run(
      [&](Rank& r) {
        ProcessGroupPtr pg = r.join(kLongTimeout);
        Tensor one = Tensor::of<int32_t>({1});
        pg->all_reduce(one)->wait();
        if (r.rank() == kCulprit) {
          std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the others into their waits
          ::raise(SIGKILL);
        }
        auto create = [&] { pg->new_group(ranks_but(pg->size(), -1)); };
        const std::string msg = expect_failure_within<PeerFailure>(create, 0, kBound, "new_group of a dead rank");
        expect_departure_named(msg, kCulprit, {"died", "closed", "exited"}, "new_group");
      },
      {kCulprit});
}

}  // namespace
}  // namespace fault
}  // namespace distcomm
