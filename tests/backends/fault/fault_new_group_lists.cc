// new_group with lists that differ between ranks (member_lists.h). Each subgroup's name is
// the call's number alone, so without the check ranks of different lists met as one group:
// rank 0 of [0, 2] summed with rank 1 of [0, 1].
//
// #0: rank 1 passes [0, 1], every other rank the group without rank 1. Rank 1 must be refused
// with an InvalidArgument naming both lists, fast (the group's timeout here is 30 s: a rank
// that waited it out, as before, is caught by the 10 s bound); the others, whose members all
// passed their list, get that group, whose sum holds no term of rank 1's. (They cannot learn
// of rank 1's list: members wait for members only, and rank 1 is none of theirs.)
// #1: the others list every rank and rank 1 passes their list of #0, which leaves it out:
// rank 1 gets no group at once, and the others are refused, naming what rank 1 passed.
// Then the world still works.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "api/errors.h"
#include "tests/backends/fault/fault_checks.h"
#include "tests/backends/fault/fault_suite.h"

namespace distcomm {
namespace fault {
namespace {

using testing::expect_failure_within;
using testing::seconds_since;

constexpr int kCulprit = 1;
// Long, so that only a check that refuses at once meets kFast.
constexpr std::chrono::seconds kLongTimeout{30};
constexpr double kFast = 10.0;

TEST_P(FaultSuite, NewGroupListsDiffer) {
  runner().run([&](Rank& r) {
    ProcessGroupPtr pg = r.join(kLongTimeout);
    const std::vector<int> others = ranks_but(pg->size(), kCulprit);
    const std::vector<int> culprits_list{0, kCulprit};
    const bool culprit = r.rank() == kCulprit;

    if (culprit) {
      const std::string msg = expect_failure_within<InvalidArgument>(
          [&] { pg->new_group(culprits_list); }, 0, kFast, "new_group of another list than rank 0's");
      expect_has(msg, "new_group #0 on group 'world'", "the refusal");
      expect_has(msg, "rank 1 passed [0, 1]", "the refusal");
      expect_has(msg, "rank 0 passed " + rank_list(others), "the refusal");
      expect_has(msg, "every rank must pass the same list", "the refusal");
    } else {
      const Clock::time_point start = Clock::now();
      ProcessGroupPtr sub = pg->new_group(others);
      EXPECT_LT(seconds_since(start), kFast) << "rank " << r.rank() << ": new_group of " << rank_list(others);
      ASSERT_NE(sub, nullptr);
      ASSERT_EQ(sub->size(), static_cast<int>(others.size()));
      Tensor t = Tensor::of<int64_t>({10 * r.rank() + 1});
      sub->all_reduce(t)->wait();
      int64_t want = 0;
      for (int m : others) want += 10 * m + 1;
      EXPECT_EQ(t.item(0), want) << "rank " << r.rank() << ": the sum over " << rank_list(others);
    }

    if (culprit) {
      const Clock::time_point start = Clock::now();
      EXPECT_EQ(pg->new_group(others), nullptr) << "rank 1 is outside the list it passed";
      EXPECT_LT(seconds_since(start), kFast) << "rank 1 waited for a group it is not in";
    } else {
      const std::string msg = expect_failure_within<InvalidArgument>(
          [&] { pg->new_group(ranks_but(pg->size(), -1)); }, 0, kFast, "new_group that rank 1 left out of");
      expect_has(msg, "new_group #1 on group 'world'", "the refusal");
      expect_has(msg, "rank 1 passed " + rank_list(others), "the refusal");
    }

    Tensor one = Tensor::of<int32_t>({1});
    pg->all_reduce(one)->wait();
    EXPECT_EQ(one.item(0), pg->size()) << "the world afterwards";
  });
}

// A list that its rank refuses (a rank outside the group, here) is refused there at once,
// and posted with the refusal where the members it names look for it: they are refused
// too, within half a second of it, quoting it (the group's timeout is 30 s: before, they
// waited it out and then said that rank 1 had not called new_group). The call is counted
// on every rank all the same: the next new_group is #1 everywhere, and works.
TEST_P(FaultSuite, NewGroupListRefused) {
  runner().run([&](Rank& r) {
    ProcessGroupPtr pg = r.join(kLongTimeout);
    const std::vector<int> everyone = ranks_but(pg->size(), -1);
    const std::vector<int> culprits_list{0, kCulprit, pg->size()};
    const std::string n = std::to_string(pg->size());
    const std::string outside = "rank " + n + " is outside [0, " + n + ")";
    if (r.rank() == kCulprit) {
      const std::string msg = expect_failure_within<InvalidArgument>(
          [&] { pg->new_group(culprits_list); }, 0, kFast, "new_group of a rank outside the group");
      expect_has(msg, outside, "the refusal");
    } else {
      const std::string msg = expect_failure_within<InvalidArgument>(
          [&] { pg->new_group(everyone); }, 0, kFast, "new_group whose member refused its list");
      expect_has(msg, "new_group #0 on group 'world'", "the partner's refusal");
      expect_has(msg, "rank 1 passed " + rank_list(culprits_list), "the partner's refusal");
      expect_has(msg, outside, "the partner's refusal");
    }

    ProcessGroupPtr sub = pg->new_group(everyone);
    ASSERT_NE(sub, nullptr);
    EXPECT_EQ(sub->name(), "world/g1") << "the numbering after a refused list";
    Tensor one = Tensor::of<int32_t>({1});
    sub->all_reduce(one)->wait();
    EXPECT_EQ(one.item(0), pg->size()) << "the group after a refused list";
  });
}

// The same list with another backend on rank 1 ("gloo" there, "shm" elsewhere): every rank is
// refused at once, naming both backends (before, each waited out the timeout in its own
// backend's rendezvous, and the errors blamed the rendezvous). No backend is made, so
// neither needs to be loadable here. The world goes on.
TEST_P(FaultSuite, NewGroupBackendsDiffer) {
  runner().run([&](Rank& r) {
    ProcessGroupPtr pg = r.join(kLongTimeout);
    const std::vector<int> everyone = ranks_but(pg->size(), -1);
    const std::string mine = r.rank() == kCulprit ? "gloo" : "shm";
    const std::string msg = expect_failure_within<InvalidArgument>(
        [&] { pg->new_group(everyone, mine); }, 0, kFast, "new_group with another backend on rank 1");
    expect_has(msg, "new_group #0 on group 'world'", "the refusal");
    expect_has(msg, "every rank must pass the same backend", "the refusal");
    expect_has(msg, r.rank() == kCulprit ? "rank 1 passed backend 'gloo', rank 0 passed 'shm'"
                                         : "passed backend 'shm', rank 1 passed 'gloo'",
               "the refusal");
    Tensor one = Tensor::of<int32_t>({1});
    pg->all_reduce(one)->wait();
    EXPECT_EQ(one.item(0), pg->size()) << "the world afterwards";
  });
}

// Rank 1 aborts the world, then calls new_group with the others, who are already waiting in
// it: it is refused at once, saying that it aborted the group, and the others fail at once
// too, quoting that (before, rank 1 made the subgroup over the parent's stopped backends and
// it ran: gloo's and mpi's subgroups reuse the parent's). What the others learn, they learn
// from rank 1's post, whatever the backend saw of the abort.
TEST_P(FaultSuite, NewGroupOnAnAbortedGroup) {
  runner().run([&](Rank& r) {
    ProcessGroupPtr pg = r.join(kLongTimeout);
    const std::vector<int> everyone = ranks_but(pg->size(), -1);
    if (r.rank() == kCulprit) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the others wait in new_group
      pg->abort();
      const std::string msg = expect_failure_within<PeerFailure>(
          [&] { pg->new_group(everyone); }, 0, 1.0, "new_group on a group this rank aborted");
      expect_has(msg, "rank 1/", "the refusal");
      expect_has(msg, "new_group #0 on group 'world'", "the refusal");
      expect_has(msg, "aborted the group (ProcessGroup::abort)", "the refusal");
    } else {
      const std::string msg = expect_failure_within<PeerFailure>(
          [&] { pg->new_group(everyone); }, 0, kFast, "new_group with a rank that aborted the group");
      expect_has(msg, "new_group #0 on group 'world'", "the peer's refusal");
      expect_has(msg, "rank 1 cannot take part: it aborted group 'world' (ProcessGroup::abort)", "the peer's refusal");
    }
  });
}

}  // namespace
}  // namespace fault
}  // namespace distcomm
