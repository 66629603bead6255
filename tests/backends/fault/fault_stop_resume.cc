// A rank stopped (SIGSTOP: a debugger, a frozen node, Ctrl-Z) while it waits in an op, past
// its peers' op timeout and past its own op's timeout and the core's grace after it, then
// resumed (SIGCONT). The peers time out waiting for it and must name it; the resumed rank's
// op must end with the group's failure (the peers' Timeout, which names it as the rank that
// did not report: it was stopped), not with the core's safety net ("backend X did not end the
// op within its timeout ... the core ended it"), which reads as a bug in the backend. The net
// counts on a steady clock that runs on while the process is stopped: before 96630b7 the
// waiter, resumed with its net long past, ended the op at once, before the backend's own
// threads -- resumed at the same instant -- could see the group's failure. That fix is tested
// on a Work (tests/api:work_stop_resume_test) and through hier (hier_frozen_host_test); this
// case runs it over every backend.
//
// Rank 1 waits in a recv from rank 0 (which never sends) with a 3 s timeout, and stops itself
// for 8 s; the others issue all_reduce #1 (1 s timeout) once the kernel says rank 1 is
// stopped, so the collective cannot finish without it on any backend (rank 1 never issues it).
// The core's grace floor is lowered to 3 s on rank 1 (core_net_for_tests.h): at the real 10 s
// the stop would last 14 s and more.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <regex>
#include <string>
#include <thread>

#include "api/diagnostics/core_net_for_tests.h"
#include "api/errors.h"
#include "tests/backends/fault/fault_checks.h"
#include "tests/backends/fault/fault_suite.h"
#include "tests/testing/stop_self.h"

namespace distcomm {
namespace fault {
namespace {

constexpr int kStopped = 1;
constexpr milliseconds kRecvTimeout{3000};  // rank 1's op, issued before it stops
constexpr milliseconds kGraceFloor{3000};   // rank 1's core grace: its net at 6 s
// Past the recv's timeout and grace (6 s), and longer than a late wake (2 s, work.cc).
constexpr std::chrono::seconds kStoppedFor{8};
constexpr milliseconds kOpTimeout{1000};  // the others' all_reduce #1

// The core's grace floor for this process while in scope: mpi's ranks run the whole suite in
// one process each.
class GraceFloor {
 public:
  explicit GraceFloor(milliseconds floor) : previous_(internal::set_core_grace_floor_for_tests(floor)) {}
  ~GraceFloor() { internal::set_core_grace_floor_for_tests(previous_); }

 private:
  milliseconds previous_;
};

// "rank 1 did not report" or "..., which waits on rank 1, which did not report".
bool names_as_not_reporting(const std::string& msg, int rank) {
  return std::regex_search(msg, std::regex("rank " + std::to_string(rank) + ",? (which )?did not report"));
}

TEST_P(FaultSuite, StoppedPastThePeersTimeoutIsNamedAndEndsWithTheirFailureOnResume) {
  // Ranks on another (simulated) host than rank 1 cannot look at its process (hier).
  const std::string why = differs("a stopped rank is named by its pid");
  runner().run([&why](Rank& r) {
    ProcessGroupPtr pg = r.join();
    const int size = pg->size();
    pg->barrier()->wait();
    if (r.rank() == kStopped) {
      const GraceFloor floor(kGraceFloor);
      // The watch publishes where this process runs in its first look, right after the
      // group's creation: a process stopped before that is named with the guesses.
      std::this_thread::sleep_for(milliseconds(500));
      Tensor in = floats(10);
      P2POptions o;
      o.timeout = kRecvTimeout;
      WorkPtr recv = pg->recv(in, 0, o);  // rank 0 never sends: it ends with the group's failure
      r.board().set("stopped_pid", to_bytes(std::to_string(::getpid())));
      // Stopped from another thread while this one waits (SIGSTOP stops every thread).
      std::thread stopper([] { testing::stop_self_for(kStoppedFor); });
      const auto start = Clock::now();
      std::string msg;
      try {
        recv->wait();
      } catch (const Error& e) {
        msg = e.what();
      }
      stopper.join();
      const double took = testing::seconds_since(start);
      std::fprintf(stderr, "rank %d (stopped for %lld s) ended after %.2f s: %s\n", r.rank(),
                   static_cast<long long>(kStoppedFor.count()), took, msg.c_str());
      ASSERT_FALSE(msg.empty()) << "rank 1's recv succeeded, and rank 0 sent nothing";
      EXPECT_EQ(msg.find("the core ended it"), std::string::npos)
          << "the resumed rank's op was ended by the core's safety net, not by its backend with the group's "
             "failure: "
          << msg;
      // The group's failure says what happened to this rank: it did not report (stopped).
      EXPECT_TRUE(names_as_not_reporting(msg, kStopped))
          << "the resumed rank's error does not say that it did not report (it was stopped): " << msg;
      // Within the grace from the resume (3 s), not at once by the net nor much later.
      EXPECT_LT(took, std::chrono::duration<double>(kStoppedFor + kGraceFloor).count() + 1.0) << msg;
      mark_done(r.board(), r.rank());
      wait_for_done(r.board(), ranks_but(size, kStopped));
      r.leave(pg);
      return;
    }
    r.board().wait({"stopped_pid"});
    const std::string pid = to_string(r.board().get("stopped_pid"));
    ASSERT_TRUE(testing::wait_until_stopped(std::stoi(pid), milliseconds(10000))) << "rank 1 did not stop";
    Tensor t = floats(10);
    AllReduceOptions o;
    o.timeout = kOpTimeout;
    const std::string who = "rank " + std::to_string(r.rank());
    const std::string msg = expect_failure_within<Timeout>([&] { pg->all_reduce(t, o)->wait(); }, 0.9, kWithin,
                                                           "an all_reduce that stopped rank 1 never issued");
    EXPECT_TRUE(names_as_not_reporting(msg, kStopped)) << who << "'s error does not name rank 1: " << msg;
    expect_stopped_rank_alone_silent(msg, kStopped, why.empty() ? pid : "", who);
    mark_done(r.board(), r.rank());
    // Until rank 1 has resumed and checked its own error (rank 0's process may serve the
    // group's store, forked runners).
    wait_for_done(r.board(), {kStopped});
    r.leave(pg);
  });
}

}  // namespace
}  // namespace fault
}  // namespace distcomm
