// Every way to make subgroups on a group this rank aborted (ProcessGroup::abort) ends as
// new_group does (NewGroupOnAnAbortedGroup, fault_new_group_lists.cc): a PeerFailure at
// once on that rank, naming the call and its number, and the ranks already waiting for it in
// the same call fail at once too, quoting it, instead of waiting in the host exchange until
// their timeout (before: the aborting rank went on into the creation over its stopped
// backends, and its peers waited). Each case makes two calls in a row, so that the second's
// number (and host exchange round) shows the first was counted alike on every rank.
#include <chrono>
#include <functional>
#include <memory>
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

// How the others reach the calls: already waiting in the first when rank 1 aborts, or
// well after rank 1 made its own first call (when a rank's wait in a round had ended on its
// abort, its part of a later round was never posted).
enum class Arrival { kWaiting, kLate };

// `call` is a subgroup maker over pg (`before`, run on every rank before rank 1 aborts,
// makes what it needs); `calls` what it is called in errors, once for each of two calls in
// a row ("split #0 on group 'world'").
void expect_refused_on_an_aborted_group(Rank& r, const std::function<void(ProcessGroupPtr&)>& call,
                                        const std::vector<std::string>& calls, Arrival arrival = Arrival::kWaiting,
                                        const std::function<void(ProcessGroupPtr&)>& before = {}) {
  ProcessGroupPtr pg = r.join(kLongTimeout);
  if (before) before(pg);
  if (r.rank() == kCulprit) {
    // The others wait in the call, or come after this rank has made its own.
    if (arrival == Arrival::kWaiting) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    pg->abort();
  } else if (arrival == Arrival::kLate) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  }
  for (const std::string& call_text : calls) {
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
                                       {"split #0 on group 'world'", "split #1 on group 'world'"});
  });
}

TEST_P(FaultSuite, SplitGroupOnAnAbortedGroup) {
  runner().run([&](Rank& r) {
    expect_refused_on_an_aborted_group(
        r, [](ProcessGroupPtr& pg) { pg->split_group({ranks_but(pg->size(), -1)}); },
        {"split_group #0 on group 'world'", "split_group #1 on group 'world'"});
  });
}

// A mesh is refused in its own argument round, before its first dimension's split_group:
// the call's number is not taken on any rank. Then new_group, whose members wait for
// lists, not in the exchange.
void mesh_then_new_group(Rank& r, Arrival arrival) {
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
      {"DeviceMesh over group 'world'", "new_group #0 on group 'world'"}, arrival);
}

TEST_P(FaultSuite, DeviceMeshOnAnAbortedGroup) {
  runner().run([&](Rank& r) { mesh_then_new_group(r, Arrival::kWaiting); });
}

// Before, the aborting rank left the mesh's round on its abort after about 0.5 s, its part
// posted, and so never posted one in split_group's: the others, coming later, passed the
// mesh's round and waited in split_group's until their timeout (30 s here).
TEST_P(FaultSuite, DeviceMeshOnAnAbortedGroupReachedLate) {
  runner().run([&](Rank& r) { mesh_then_new_group(r, Arrival::kLate); });
}

// flatten of a mesh made before the abort: refused in its own round as the constructor.
// A 1-D mesh's flatten makes no group; the mesh took split_group #0.
TEST_P(FaultSuite, FlattenOnAnAbortedGroupReachedLate) {
  runner().run([&](Rank& r) {
    std::unique_ptr<DeviceMesh> mesh;
    int calls = 0;
    expect_refused_on_an_aborted_group(
        r,
        [&](ProcessGroupPtr& pg) {
          if (calls++ == 0) {
            mesh->flatten("all");
          } else {
            pg->new_group(ranks_but(pg->size(), -1));
          }
        },
        {"DeviceMesh::flatten over group 'world'", "new_group #1 on group 'world'"}, Arrival::kLate,
        [&](ProcessGroupPtr& pg) { mesh = std::make_unique<DeviceMesh>(pg, std::vector<int>{pg->size()},
                                                                      std::vector<std::string>{"dp"}); });
  });
}

}  // namespace
}  // namespace fault
}  // namespace distcomm
