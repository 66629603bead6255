// A program that ends a group from a Work's callback: aborts it, or drops its last
// reference, as the op ends (the usual "abort on error" handler, or a group held only by
// its callback). The callback runs on whatever thread ends the op: the backend's own (an op
// nobody waits for: gloo's worker, shm's progress thread, mpi's thread, the hierarchy's)
// or the thread that waits for it. Every backend must let it: the op keeps its result, the
// callback returns, later ops of that group are refused, and nothing crashes or hangs
// (helper-59's audit: gloo joined its worker from itself, std::terminate, or waited for
// ever for the callback that waited for it).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "api/errors.h"
#include "tests/backends/fault/fault_checks.h"
#include "tests/backends/fault/fault_suite.h"

namespace distcomm {
namespace fault {
namespace {

// A subgroup of every rank (a new group, so that ending it leaves the runner's world group).
ProcessGroupPtr subgroup_of_everyone(ProcessGroup& pg) {
  std::vector<int> everyone;
  for (int i = 0; i < pg.size(); ++i) everyone.push_back(i);
  return pg.new_group(everyone);
}

// Until `flag` is set by a callback nobody waits for, or the suite's bound has passed.
void wait_until_set(const std::atomic<bool>& flag) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::duration<double>(kWithin);
  while (!flag && std::chrono::steady_clock::now() < give_up) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

enum class Ending { kAbort, kDestroy };
enum class Waiter { kNobody, kTheCaller };

// Every rank all_reduces over a subgroup of every rank; rank 0's op has a callback that
// ends the subgroup. The others issue only once rank 0's callback is set, so that its op
// ends after that, on the thread the case names.
void end_a_group_from_a_callback(Runner& runner, Ending ending, Waiter waiter) {
  runner.run([&](Rank& r) {
    ProcessGroupPtr pg = r.join();
    ProcessGroupPtr sub = subgroup_of_everyone(*pg);
    Tensor t = floats(100);
    t.fill(1);
    if (r.rank() != 0) {
      r.board().wait({"callback_set"}, std::chrono::duration_cast<std::chrono::milliseconds>(kGroupTimeout));
      sub->all_reduce(t)->wait();
      EXPECT_EQ(t.data_as<float>()[0], static_cast<float>(pg->size()));
      pg->barrier()->wait();  // the world group goes on
      return;
    }
    auto ran = std::make_shared<std::atomic<bool>>(false);  // outlives this frame, as the callback may
    auto holder = std::make_shared<ProcessGroupPtr>(sub);
    WorkPtr w = sub->all_reduce(t);  // waits for the others, who issue it only after this
    w->on_finish([ran, holder, ending](std::exception_ptr) {
      if (ending == Ending::kAbort) {
        (*holder)->abort();
      } else {
        holder->reset();
      }
      *ran = true;
    });
    if (ending == Ending::kDestroy) sub.reset();  // the callback holds the last reference
    if (waiter == Waiter::kTheCaller) {
      // The others are let in only once this thread waits: the op is this thread's to run
      // (gloo leaves a waited op to its waiter) and ends on it.
      std::thread let_in([&r] {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        r.board().set("callback_set", std::string("1"));
      });
      EXPECT_NO_THROW(w->wait());
      let_in.join();
    } else {
      r.board().set("callback_set", std::string("1"));
      wait_until_set(*ran);
    }
    ASSERT_TRUE(*ran) << "the all_reduce did not end, or its callback did not return";
    EXPECT_NO_THROW(w->wait());  // the callback returned; the Work ends right after
    EXPECT_TRUE(w->is_success());
    EXPECT_EQ(t.data_as<float>()[0], static_cast<float>(pg->size()));
    if (ending == Ending::kAbort) {
      EXPECT_THROW(sub->barrier()->wait(), Error) << "an aborted group refuses later ops";
      sub.reset();
    }
    w.reset();
    pg->barrier()->wait();  // the world group goes on
  });
}

// The same for a recv nobody waits for (gloo ends it on a transfer thread of its own):
// rank 0's recv from rank 1 aborts the subgroup as it ends.
TEST_P(FaultSuite, AbortFromTheCallbackOfARecvNobodyWaitsFor) {
  runner().run([&](Rank& r) {
    ProcessGroupPtr pg = r.join();
    ProcessGroupPtr sub = subgroup_of_everyone(*pg);
    Tensor t = floats(100);
    if (r.rank() == 1) {
      t.fill(7);
      r.board().wait({"callback_set"}, std::chrono::duration_cast<std::chrono::milliseconds>(kGroupTimeout));
      sub->send(t, 0)->wait();
    } else if (r.rank() == 0) {
      auto ran = std::make_shared<std::atomic<bool>>(false);
      WorkPtr w = sub->recv(t, 1);
      w->on_finish([ran, sub](std::exception_ptr) {
        sub->abort();
        *ran = true;
      });
      r.board().set("callback_set", std::string("1"));
      wait_until_set(*ran);
      ASSERT_TRUE(*ran) << "the recv did not end, or its callback did not return";
      EXPECT_NO_THROW(w->wait());
      EXPECT_TRUE(w->is_success());
      EXPECT_EQ(t.data_as<float>()[0], 7.0f);
      EXPECT_THROW(sub->barrier()->wait(), Error) << "an aborted group refuses later ops";
    }
    pg->barrier()->wait();  // the world group goes on
  });
}

// The usual handler, on an op that fails: rank 1 leaves the subgroup without issuing
// all_reduce #1, which the others wait in; their callback aborts the subgroup when the op
// ends with the error. Where the stall watch records the failure (a departure under mpi), the
// callback runs while the watch holds its failure lock, which the abort's stop of the watch
// takes (helper-60's review: mpi hung there for good).
TEST_P(FaultSuite, AbortFromTheCallbackOfAnOpThatFailsBecauseARankLeft) {
  runner().run([&](Rank& r) {
    ProcessGroupPtr pg = r.join();
    ProcessGroupPtr sub = subgroup_of_everyone(*pg);
    sub->barrier()->wait();
    if (r.rank() == 1) {
      sub.reset();  // leaves; the world group stays
      pg->barrier()->wait();
      return;
    }
    Tensor t = floats(10);
    auto ran = std::make_shared<std::atomic<bool>>(false);
    WorkPtr w = sub->all_reduce(t);
    w->on_finish([ran, sub](std::exception_ptr error) {
      if (error) sub->abort();
      *ran = true;
    });
    const std::string msg = testing::expect_failure_within<PeerFailure>([&] { w->wait(); }, 0, kWithin,
                                                                        "the all_reduce rank 1 left without issuing");
    expect_departure_named(msg, 1, {"died", "closed", "exited", "shut", "left"}, "the all_reduce");
    EXPECT_TRUE(*ran);
    EXPECT_THROW(sub->barrier()->wait(), Error) << "an aborted group refuses later ops";
    sub.reset();
    pg->barrier()->wait();  // the world group goes on
  });
}

TEST_P(FaultSuite, AbortFromTheCallbackOfAnOpNobodyWaitsFor) {
  end_a_group_from_a_callback(runner(), Ending::kAbort, Waiter::kNobody);
}

TEST_P(FaultSuite, DestroyFromTheCallbackOfAnOpNobodyWaitsFor) {
  end_a_group_from_a_callback(runner(), Ending::kDestroy, Waiter::kNobody);
}

TEST_P(FaultSuite, AbortFromTheCallbackOfAnOpItsCallerWaitsFor) {
  end_a_group_from_a_callback(runner(), Ending::kAbort, Waiter::kTheCaller);
}

TEST_P(FaultSuite, DestroyFromTheCallbackOfAnOpItsCallerWaitsFor) {
  end_a_group_from_a_callback(runner(), Ending::kDestroy, Waiter::kTheCaller);
}

// How a callback waits for another op: the Work recv returned, a batch_isend_irecv's Work,
// or a then() Work; each with a timeout.
enum class OtherWork { kRecv, kBatch, kThen };

// Rank 0's callback on a recv waits, with a 5 s timeout, for a second recv from rank 1.
// Every backend must end that wait: with the second recv finished and its data (shm drives
// the group there), or with an Error that says a wait inside a callback cannot be (gloo,
// mpi: the callback runs where nothing else moves); never a hang, nor a Timeout for an op
// whose data was sent (helper-66 found shm's same-poll hang; the batch and then() Works did
// not drive their parts).
void wait_from_a_callback(Runner& runner, OtherWork kind) {
  runner.run([&](Rank& r) {
    ProcessGroupPtr pg = r.join();
    Tensor a = floats(4), b = floats(4);
    P2POptions first_tag, second_tag;
    first_tag.tag = 1;
    second_tag.tag = 2;
    if (r.rank() == 1) {
      r.board().wait({"callback_set"}, std::chrono::duration_cast<std::chrono::milliseconds>(kGroupTimeout));
      a.fill(1);
      b.fill(2);
      pg->send(a, 0, first_tag)->wait();
      pg->send(b, 0, second_tag)->wait();
    } else if (r.rank() == 0) {
      WorkPtr first = pg->recv(a, 1, first_tag);
      WorkPtr second;
      if (kind == OtherWork::kBatch) {
        std::vector<P2POp> batch = {P2POp::recv(b, 1)};
        second = pg->batch_isend_irecv(batch, second_tag);
      } else {
        second = pg->recv(b, 1, second_tag);
        if (kind == OtherWork::kThen) second = then(second, [] {});
      }
      auto outcome = std::make_shared<std::promise<std::string>>();
      first->on_finish([second, outcome](std::exception_ptr) {
        try {
          second->wait(std::chrono::seconds(5));
          outcome->set_value("finished");
        } catch (const std::exception& e) {
          outcome->set_value(e.what());
        }
      });
      r.board().set("callback_set", std::string("1"));
      std::future<std::string> got = outcome->get_future();
      ASSERT_EQ(got.wait_for(std::chrono::duration<double>(kWithin)), std::future_status::ready)
          << "the callback's wait for the second recv did not return";
      const std::string said = got.get();
      if (said == "finished") {
        EXPECT_EQ(b.data_as<float>()[0], 2.0f);
      } else {
        EXPECT_NE(said.find("callback"), std::string::npos) << "neither finished nor refused as a wait in a callback: " << said;
      }
      std::printf("[ %s ] the callback's wait: %s\n", runner.backend().c_str(), said.c_str());
      first->wait();
      EXPECT_EQ(a.data_as<float>()[0], 1.0f);
      if (said != "finished") second->wait();  // the recv itself still ends, outside the callback
      EXPECT_EQ(b.data_as<float>()[0], 2.0f);
    }
    pg->barrier()->wait();
  });
}

TEST_P(FaultSuite, AWaitInACallbackForAnotherRecvEnds) { wait_from_a_callback(runner(), OtherWork::kRecv); }

TEST_P(FaultSuite, AWaitInACallbackForABatchEnds) { wait_from_a_callback(runner(), OtherWork::kBatch); }

TEST_P(FaultSuite, AWaitInACallbackForAThenWorkEnds) { wait_from_a_callback(runner(), OtherWork::kThen); }

}  // namespace
}  // namespace fault
}  // namespace distcomm
