// Every way to make subgroups on a group this rank aborted (ProcessGroup::abort) ends as
// new_group does (NewGroupOnAnAbortedGroup, fault_new_group_lists.cc): a PeerFailure at
// once on that rank, naming the call and its number, and the ranks already waiting for it in
// the same call fail at once too, quoting it, instead of waiting in the host exchange until
// their timeout (before: the aborting rank went on into the creation over its stopped
// backends, and its peers waited). Each case makes two calls in a row, so that the second's
// number (and host exchange round) shows the first was counted alike on every rank.
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "api/device_mesh.h"
#include "api/errors.h"
#include "tests/backends/fault/fault_checks.h"
#include "tests/backends/fault/fault_suite.h"

namespace distcomm {
namespace fault {
namespace {

using testing::expect_failure_within;

constexpr int kCulprit = 1;
// Long, so that only a refusal that reaches the others at once meets kFast.
constexpr std::chrono::seconds kLongTimeout{30};
constexpr double kFast = 10.0;

// `call` is a subgroup maker over pg; `name` what it is called in errors with its number
// ("split #0"), once for each of two calls in a row.
void expect_refused_on_an_aborted_group(Rank& r, const std::function<void(ProcessGroupPtr&)>& call,
                                        const std::vector<std::string>& names) {
  ProcessGroupPtr pg = r.join(kLongTimeout);
  if (r.rank() == kCulprit) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the others wait in the call
    pg->abort();
  }
  for (const std::string& name : names) {
    const std::string call_text = name + " on group 'world'";
    if (r.rank() == kCulprit) {
      const std::string msg = expect_failure_within<PeerFailure>([&] { call(pg); }, 0, 1.0,
                                                                 "a subgroup maker on a group this rank aborted");
      expect_has(msg, "rank 1/", "the refusal");
      expect_has(msg, call_text, "the refusal");
      expect_has(msg, "this rank aborted the group (ProcessGroup::abort) before this call", "the refusal");
    } else {
      const std::string msg = expect_failure_within<PeerFailure>([&] { call(pg); }, 0, kFast,
                                                                 "a subgroup maker with a rank that aborted the group");
      expect_has(msg, call_text, "the peer's refusal");
      expect_has(msg, "rank 1 cannot take part: it aborted group 'world' (ProcessGroup::abort) before this call",
                 "the peer's refusal");
    }
  }
  // The rank that serves the group's store (rank 0) stays until every rank has read it.
  r.board().set("done/" + std::to_string(r.rank()), "1");
  std::vector<std::string> done;
  for (int k = 0; k < pg->size(); ++k) done.push_back("done/" + std::to_string(k));
  r.board().wait(done, std::chrono::milliseconds(60000));
}

TEST_P(FaultSuite, SplitOnAnAbortedGroup) {
  runner().run([&](Rank& r) {
    expect_refused_on_an_aborted_group(r, [](ProcessGroupPtr& pg) { pg->split(0, pg->rank()); },
                                       {"split #0", "split #1"});
  });
}

TEST_P(FaultSuite, SplitGroupOnAnAbortedGroup) {
  runner().run([&](Rank& r) {
    expect_refused_on_an_aborted_group(
        r, [](ProcessGroupPtr& pg) { pg->split_group({ranks_but(pg->size(), -1)}); },
        {"split_group #0", "split_group #1"});
  });
}

// A mesh's groups are split_group's: its first dimension's call is refused, and the mesh
// with it. Then new_group, whose members wait for lists, not in the exchange: its number
// counts the mesh's call too.
TEST_P(FaultSuite, DeviceMeshOnAnAbortedGroup) {
  runner().run([&](Rank& r) {
    int calls = 0;
    expect_refused_on_an_aborted_group(
        r,
        [&](ProcessGroupPtr& pg) {
          if (calls++ == 0) {
            DeviceMesh mesh(pg, {pg->size()}, {"dp"});
          } else {
            pg->new_group(ranks_but(pg->size(), -1));
          }
        },
        {"split_group #0", "new_group #1"});
  });
}

}  // namespace
}  // namespace fault
}  // namespace distcomm
