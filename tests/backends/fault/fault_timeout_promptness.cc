// An op's own timeout must end it near its deadline, however short: users set 100 ms
// timeouts in tests and health checks. Explaining the Timeout (asking every rank where it
// is) once held it up to a second past a 100 ms deadline (docs/failures.md, "How late a
// Timeout fires").
#include <chrono>
#include <string>
#include <thread>

#include "api/errors.h"
#include "tests/backends/fault/fault_checks.h"
#include "tests/backends/fault/fault_suite.h"
#include "tests/testing/stop_self.h"

namespace distcomm {
namespace fault {
namespace {

// Rank 1 never issues all_reduce #1, and is stopped (SIGSTOP, 2 s) meanwhile, so that its
// stall watch answers nobody; the others issue it with a 200 ms timeout, which must fire well
// under a second after its issue, still naming rank 1. The Timeout's explanation waited up to
// a tick and a half second for every rank's answer (a stopped rank's never comes): 1.05 s
// at 4 ranks on gloo; a 100 ms timeout fired after 1.0 s on gloo, 0.5 s on shm with rank 1
// running.
TEST_P(FaultSuite, ShortTimeoutFiresNearItsDeadline) {
  const bool can_stop = backend() != "in_process";  // its ranks are threads of one process
  runner().run([can_stop](Rank& r) {
    ProcessGroupPtr pg = r.join();
    pg->barrier()->wait();
    if (r.rank() == 1) {
      if (can_stop) {
        // Its watch's first look publishes where this process runs: let it end first.
        std::this_thread::sleep_for(milliseconds(500));
        r.board().set("stopped_pid", std::to_string(::getpid()));
        testing::stop_self_for(std::chrono::seconds(4));
      }
      wait_for_done(r.board(), ranks_but(pg->size(), 1));
      return;
    }
    // Issued once rank 1 is stopped, as the kernel says (not after a sleep: a loaded machine
    // may start rank 1's stop late).
    if (can_stop) {
      r.board().wait({"stopped_pid"});
      ASSERT_TRUE(testing::wait_until_stopped(std::stoi(to_string(r.board().get("stopped_pid"))),
                                              milliseconds(10000)))
          << "rank 1 did not stop";
    }
    Tensor t = floats(10);
    AllReduceOptions o;
    o.timeout = milliseconds(200);
    // Explained within half the timeout, past a slack of a quarter of it (docs/failures.md):
    // 0.36 s measured, 0.55-0.81 s with the machine loaded by builds (load average ~10 on 2
    // cores). The old watch waited a tick and a half second for rank 1's answer after its
    // deadline: 1.05 s and more, the least the bound must stay under.
    const std::string msg = expect_failure_within<Timeout>([&] { pg->all_reduce(t, o)->wait(); }, 0.15, 1.0,
                                                           "an all_reduce with a 200 ms timeout");
    expect_has(msg, "rank 1", "the Timeout, naming the rank that did not come");
    mark_done(r.board(), r.rank());
  });
}

}  // namespace
}  // namespace fault
}  // namespace distcomm
