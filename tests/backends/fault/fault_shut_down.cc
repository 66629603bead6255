// A rank that destroys its group with an op of its own still in flight (a recv no rank
// sends to) ends that op with a PeerFailure saying the group was shut down, on every
// backend: code that catches PeerFailure to recover sees one type (mpi said Error).
#include <string>

#include "api/errors.h"
#include "tests/backends/fault/fault_checks.h"
#include "tests/backends/fault/fault_suite.h"

namespace distcomm {
namespace fault {
namespace {

using testing::expect_failure_within;

TEST_P(FaultSuite, AnOpCutOffByItsOwnGroupsEndIsAPeerFailure) {
  runner().run([&](Rank& r) {
    ProcessGroupPtr pg = r.join();
    pg->barrier()->wait();
    Tensor never = floats(4);
    P2POptions o;
    o.tag = 99;  // no rank sends on it
    WorkPtr open = pg->recv(never, (r.rank() + 1) % pg->size(), o);
    r.leave(pg);
    const std::string msg = expect_failure_within<PeerFailure>([&] { open->wait(); }, 0, kWithin,
                                                               "a recv its own group's end cut off");
    EXPECT_TRUE(msg.find("shut down") != std::string::npos || msg.find("shut the group down") != std::string::npos)
        << "the cut-off recv should say the group was shut down: " << msg;
  });
}

}  // namespace
}  // namespace fault
}  // namespace distcomm
