// The fault-conformance suite: how a group of three ranks (or of a runner's ranks(), 4 for
// hierarchical layouts) must fail, written once over ProcessGroup for every backend, as the collective conformance suite
// (tests/backends/conformance) is for results.
//
// Every case (fault_*.cc) is a TEST_P of FaultSuite with the same expectations on every
// backend: the error class; every rank (every survivor) reports it; the culprit rank named
// in words ("rank 1 died", "rank 1 has not issued #1", the "rank 1:" line of a Desync's
// table); rank 1 is the culprit, rank 0 also where the store's host matters, and ranks 2
// and up are bystanders that agree with rank 0; within the group's timeout (5 s) + 2 s; and never a value (an op of a rank
// that disagrees never succeeds). A backend's test (<backend>_fault_test.cc) only says how
// its ranks start: it instantiates the suite with a Runner. What a backend cannot do is
// written here, in the suite, with the reason (fault_differences.cc): the case is skipped
// with that reason printed, or runs with the named different expectation and says so.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <ostream>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "api/process_group.h"
#include "api/store/store.h"

namespace distcomm {
namespace fault {

// The ranks of a case's job, unless the runner says otherwise (Runner::ranks()).
constexpr int kRanks = 3;
// Every group's timeout (every op's, unless the case sets one): short, so that the cases
// that must wait it out keep the suite short.
constexpr std::chrono::milliseconds kGroupTimeout{5000};
// A failure reaches every rank within the group's timeout plus this.
constexpr double kSlack = 2.0;
// The bound the suite holds every failure to: the group's timeout + 2 s.
constexpr double kWithin = std::chrono::duration<double>(kGroupTimeout).count() + kSlack;
// A rank that dies or leaves is named on every survivor within this of its death.
constexpr double kDeathNamedWithin = 1.0;

// One rank of a case, as the backend's runner started it.
class Rank {
 public:
  virtual ~Rank() = default;
  virtual int rank() const = 0;
  // This rank's world group of the runner's ranks(), made as a program makes it (init_process_group,
  // where the runner's ranks are processes). Throws what creation throws.
  virtual ProcessGroupPtr join(std::chrono::milliseconds timeout = kGroupTimeout) = 0;
  // Ends this rank's part as a program that is done does: destroys its group (the default
  // group too); where the rank is a process of its own, the process exits when the case
  // returns, rank 0's store with it.
  virtual void leave(ProcessGroupPtr& pg) = 0;
  // A store every rank reaches and no rank hosts, for the test's own handshakes: it
  // outlives every rank (the group's store may go with rank 0).
  virtual Store& board() = 0;
};

class Runner {
 public:
  virtual ~Runner() = default;
  // The backend's name, as ProcessGroup takes it ("gloo", "shm", "auto", "mpi", "in_process").
  virtual std::string backend() const = 0;
  // How many ranks a case's job has: kRanks, or more where the layout needs them (hier's
  // 2 hosts x 2 ranks, 3 + 1). The cases read the group's size, never assume 3.
  virtual int ranks() const { return kRanks; }
  // Why this backend cannot run here at all ("" when it can): every case is skipped with it.
  virtual std::string unavailable() const { return ""; }
  // Runs fn on every rank of a fresh job of ranks(), and fails the test with what any rank
  // reported. `killed`: ranks that may end by SIGKILL (the case kills them).
  virtual void run(const std::function<void(Rank&)>& fn, const std::set<int>& killed = {}) = 0;
};

using RunnerPtr = std::shared_ptr<Runner>;

// gtest prints a parameter with this: the backend's name rather than a pointer's bytes.
void PrintTo(const RunnerPtr& runner, std::ostream* out);

// The suite. A backend's test instantiates it:
//   INSTANTIATE_TEST_SUITE_P(gloo, FaultSuite, ::testing::Values(forked_runner("gloo")), runner_name);
class FaultSuite : public ::testing::TestWithParam<RunnerPtr> {
 protected:
  // Skips, with the reason printed, a case the backend cannot run (fault_differences.cc).
  void SetUp() override;
  Runner& runner() const { return *GetParam(); }
  const std::string& backend() const { return backend_; }
  // The reason, when this backend meets this case with a different expectation named
  // `difference` (fault_differences.cc), printed in the test's log; "" when it does not.
  std::string differs(const std::string& difference) const;

 private:
  std::string backend_;
};

std::string runner_name(const ::testing::TestParamInfo<RunnerPtr>& info);

}  // namespace fault
}  // namespace distcomm
