// ProcessGroup::shrink over the in_process test plugin (N ProcessGroups of this process,
// tests/testing/in_process_group.h): the survivors of a group of 4 form a group of
// themselves, renumbered in their order, whose collectives are exact; a shrunk group
// shrinks again; an aborted group shrinks; bad lists are refused, naming the problem,
// before anything is counted; survivors that disagree on the list never meet.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api/errors.h"
#include "api/process_group.h"
#include "tests/testing/in_process_group.h"

namespace distcomm {
namespace {

using std::chrono::milliseconds;
using testing::in_process_world;

constexpr milliseconds kCreation{20000};  // far above what creation takes; a hang fails

// Runs fn(old rank) on one thread per rank in `ranks` and joins them; returns what each
// threw ("" when nothing), by rank.
std::map<int, std::string> on_ranks(const std::vector<int>& ranks, const std::function<void(int)>& fn) {
  std::map<int, std::string> errors;
  for (int r : ranks) errors[r];
  std::vector<std::thread> threads;
  for (int r : ranks) {
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

void expect_no_errors(const std::map<int, std::string>& errors) {
  for (const auto& [rank, error] : errors) EXPECT_EQ(error, "") << "rank " << rank;
}

std::vector<int> without(int n, const std::vector<int>& excluded) {
  std::vector<int> out;
  for (int r = 0; r < n; ++r) {
    if (std::find(excluded.begin(), excluded.end(), r) == excluded.end()) out.push_back(r);
  }
  return out;
}

std::string text(const std::vector<int>& v) {
  std::string s = "[";
  for (int x : v) s += (s.size() > 1 ? "," : "") + std::to_string(x);
  return s + "]";
}

// An all_reduce over `pg` of a value that says which original ranks took part (bit
// 1 << global rank) and one that is a plain sum, checked exactly against `members`.
void expect_exact_sum(ProcessGroup& pg, const std::vector<int>& members) {
  const int g = pg.global_rank(pg.rank());
  Tensor t = Tensor::of<double>({double(1 << g), double(g + 1), 0.5});
  pg.all_reduce(t)->wait();
  double bits = 0, sum = 0;
  for (int m : members) {
    bits += double(1 << m);
    sum += double(m + 1);
  }
  EXPECT_EQ(t.to_doubles(), (std::vector<double>{bits, sum, 0.5 * double(members.size())}))
      << "rank " << pg.rank() << " of group '" << pg.name() << "' (global " << g << "), members " << text(members);
}

// The survivors' group: size and ranks renumbered in the old ranks' order, global ranks
// the survivors', a fresh (not aborted) group whose all_reduce is exact.
void expect_survivors_group(const ProcessGroupPtr& shrunk, int old_rank, const std::vector<int>& survivors) {
  ASSERT_TRUE(shrunk) << "rank " << old_rank;
  const int expected_rank = int(std::find(survivors.begin(), survivors.end(), old_rank) - survivors.begin());
  EXPECT_EQ(shrunk->size(), int(survivors.size())) << "old rank " << old_rank;
  EXPECT_EQ(shrunk->rank(), expected_rank) << "old rank " << old_rank;
  EXPECT_EQ(shrunk->global_ranks(), survivors) << "old rank " << old_rank;
  for (int r = 0; r < shrunk->size(); ++r) EXPECT_EQ(shrunk->global_rank(r), survivors[size_t(r)]);
  expect_exact_sum(*shrunk, survivors);
}

class ShrinkWithout : public ::testing::TestWithParam<std::vector<int>> {};

TEST_P(ShrinkWithout, SurvivorsAreRenumberedInOrderAndReduceExactly) {
  const std::vector<int> excluded = GetParam();
  auto world = in_process_world(4);
  // Every rank runs one op first: the excluded ones then simply stop, as a dead rank does.
  expect_no_errors(on_ranks({0, 1, 2, 3}, [&](int r) { expect_exact_sum(*world[size_t(r)], {0, 1, 2, 3}); }));
  const std::vector<int> survivors = without(4, excluded);
  expect_no_errors(on_ranks(survivors, [&](int r) {
    ProcessGroupPtr shrunk = world[size_t(r)]->shrink(excluded, kCreation);
    expect_survivors_group(shrunk, r, survivors);
    EXPECT_NE(shrunk->name(), world[size_t(r)]->name());
    // Twice, to see that ops keep their order in the new group too.
    expect_exact_sum(*shrunk, survivors);
  }));
}

INSTANTIATE_TEST_SUITE_P(Lists, ShrinkWithout,
                         ::testing::Values(std::vector<int>{2}, std::vector<int>{0}, std::vector<int>{3, 1}),
                         [](const ::testing::TestParamInfo<std::vector<int>>& info) {
                           std::string name = "Without";
                           for (int r : info.param) name += std::to_string(r);
                           return name;
                         });

// A shrunk group shrinks again: its ranks are its own (0..2), its global ranks the world's.
TEST(Shrink, AShrunkGroupShrinksAgain) {
  auto world = in_process_world(4);
  expect_no_errors(on_ranks({0, 1, 3}, [&](int r) {
    ProcessGroupPtr three = world[size_t(r)]->shrink({2}, kCreation);
    expect_survivors_group(three, r, {0, 1, 3});
    if (r == 0) return;  // three's rank 0 (world rank 0) is gone next
    ProcessGroupPtr two = three->shrink({0}, kCreation);
    ASSERT_TRUE(two);
    EXPECT_EQ(two->size(), 2);
    EXPECT_EQ(two->rank(), r == 1 ? 0 : 1);
    EXPECT_EQ(two->global_ranks(), (std::vector<int>{1, 3}));
    expect_exact_sum(*two, {1, 3});
  }));
}

// Each shrink is its own group, even with the same list: the survivors count their shrinks.
TEST(Shrink, TheSameListTwiceGivesTwoGroups) {
  auto world = in_process_world(4);
  expect_no_errors(on_ranks({0, 1, 3}, [&](int r) {
    ProcessGroupPtr first = world[size_t(r)]->shrink({2}, kCreation);
    ProcessGroupPtr second = world[size_t(r)]->shrink({2}, kCreation);
    EXPECT_NE(first->name(), second->name());
    first->abort();  // the second does not depend on the first
    expect_survivors_group(second, r, {0, 1, 3});
  }));
}

// The usual recovery: an op waits for a rank that is gone; the survivors abort the group
// (the op ends), then shrink the aborted group and go on.
TEST(Shrink, AnAbortedGroupShrinks) {
  auto world = in_process_world(4);
  expect_no_errors(on_ranks({0, 1, 2, 3}, [&](int r) { expect_exact_sum(*world[size_t(r)], {0, 1, 2, 3}); }));
  std::atomic<int> issued{0};
  expect_no_errors(on_ranks({0, 1, 3}, [&](int r) {
    ProcessGroup& pg = *world[size_t(r)];
    Tensor t = Tensor::of<float>({1.0f});
    WorkPtr w = pg.all_reduce(t);  // waits for rank 2, which never comes
    ++issued;
    while (issued < 3) std::this_thread::sleep_for(milliseconds(1));
    pg.abort();
    EXPECT_THROW(w->wait(), Error) << "rank " << r;
    EXPECT_THROW(pg.all_reduce(t)->wait(), Error) << "rank " << r << ": the aborted group ran an op";
    expect_survivors_group(pg.shrink({2}, kCreation), r, {0, 1, 3});
  }));
}

// What a call throws: "InvalidArgument: <message>", another type's name, or "nothing".
std::string refusal(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InvalidArgument& e) {
    return std::string("InvalidArgument: ") + e.what();
  } catch (const Error& e) {
    return std::string("another Error: ") + e.what();
  }
  return "nothing";
}

void expect_refused(const std::string& what, const std::vector<std::string>& texts) {
  EXPECT_EQ(what.rfind("InvalidArgument: ", 0), 0u) << what;
  for (const std::string& t : texts) EXPECT_NE(what.find(t), std::string::npos) << "should say '" << t << "': " << what;
}

// Bad lists are refused on the caller at once (nobody waits), naming the problem, and are
// not counted: the survivors' next shrink still meets.
TEST(Shrink, BadListsAreRefusedNamingTheProblem) {
  auto world = in_process_world(4);
  ProcessGroup& one = *world[1];
  const auto started = std::chrono::steady_clock::now();
  expect_refused(refusal([&] { one.shrink({1}, kCreation); }), {"names this rank", "[1]"});
  expect_refused(refusal([&] { one.shrink({2, 3, 2}, kCreation); }), {"rank 2 is listed twice", "[2, 3, 2]"});
  expect_refused(refusal([&] { one.shrink({4}, kCreation); }), {"rank 4 is outside [0, 4)"});
  expect_refused(refusal([&] { one.shrink({-1}, kCreation); }), {"rank -1 is outside [0, 4)"});
  // Nobody left: such a list always names the caller too, and is refused for that.
  expect_refused(refusal([&] { one.shrink({0, 1, 2, 3}, kCreation); }), {"names this rank"});
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(2)) << "a refusal waited for peers";
  // Every message says where: the group and the rank.
  expect_refused(refusal([&] { one.shrink({9}, kCreation); }), {"shrink of group '" + one.name() + "'", "rank 1/4"});
  expect_no_errors(on_ranks({0, 1, 3}, [&](int r) {
    expect_survivors_group(world[size_t(r)]->shrink({2}, kCreation), r, {0, 1, 3});
  }));
}

// Survivors that disagree on who is gone never run an op together: each list is its own
// group, which times out waiting for the ranks that went elsewhere.
TEST(Shrink, SurvivorsThatDisagreeDoNotMeet) {
  auto world = in_process_world(4);
  std::map<int, std::string> what;
  std::mutex mu;
  on_ranks({0, 1, 3}, [&](int r) {
    // Ranks 0 and 1 think 2 is gone (they expect 0, 1, 3); rank 3 thinks 1 and 2 are
    // (it expects 0 and 3). Neither group has all its members.
    const std::vector<int> excluded = r == 3 ? std::vector<int>{1, 2} : std::vector<int>{2};
    std::string result;
    try {
      world[size_t(r)]->shrink(excluded, milliseconds(1500));
      result = "a group";
    } catch (const Timeout& e) {
      result = std::string("Timeout: ") + e.what();
    } catch (const std::exception& e) {
      result = std::string("other: ") + e.what();
    }
    std::lock_guard<std::mutex> lock(mu);
    what[r] = result;
  });
  for (int r : {0, 1, 3}) {
    EXPECT_EQ(what[r].rfind("Timeout: ", 0), 0u) << "rank " << r << ": " << what[r];
    // The time shrink allowed, not the ops' timeout the shrunk group keeps.
    EXPECT_NE(what[r].find("timeout is 1.5 s"), std::string::npos) << what[r];
  }
  // Rank 3's group waited for world rank 0 (which went to the other), theirs for world rank 3.
  for (int r : {0, 1}) {
    EXPECT_NE(what[r].find("'world/shrink0-without-2'"), std::string::npos) << what[r];
    EXPECT_NE(what[r].find("world ranks [3]"), std::string::npos) << what[r];
  }
  EXPECT_NE(what[3].find("'world/shrink0-without-1,2'"), std::string::npos) << what[3];
  EXPECT_NE(what[3].find("world ranks [0]"), std::string::npos) << what[3];
}

}  // namespace
}  // namespace distcomm
