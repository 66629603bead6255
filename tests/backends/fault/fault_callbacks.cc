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
#include <memory>
#include <string>
#include <thread>

#include "api/errors.h"
#include "tests/backends/fault/fault_checks.h"
#include "tests/backends/fault/fault_suite.h"

namespace distcomm {
namespace fault {
namespace {

enum class Ending { kAbort, kDestroy };
enum class Waiter { kNobody, kTheCaller };

// Every rank all_reduces over a subgroup of every rank; rank 0's op has a callback that
// ends the subgroup. The others issue only once rank 0's callback is set, so that its op
// ends after that, on the thread the case names.
void end_a_group_from_a_callback(Runner& runner, Ending ending, Waiter waiter) {
  runner.run([&](Rank& r) {
    ProcessGroupPtr pg = r.join();
    std::vector<int> everyone;
    for (int i = 0; i < pg->size(); ++i) everyone.push_back(i);
    ProcessGroupPtr sub = pg->new_group(everyone);
    Tensor t = floats(100);
    t.fill(1);
    if (r.rank() != 0) {
      r.board().wait({"callback_set"}, std::chrono::duration_cast<std::chrono::milliseconds>(kGroupTimeout));
      sub->all_reduce(t)->wait();
      EXPECT_EQ(t.data_as<float>()[0], static_cast<float>(pg->size()));
      pg->barrier()->wait();  // the world group goes on
      return;
    }
    std::atomic<bool> ran{false};
    auto holder = std::make_shared<ProcessGroupPtr>(sub);
    WorkPtr w = sub->all_reduce(t);  // waits for the others, who issue it only after this
    w->on_finish([&ran, holder, ending](std::exception_ptr) {
      if (ending == Ending::kAbort) {
        (*holder)->abort();
      } else {
        holder->reset();
      }
      ran = true;
    });
    if (ending == Ending::kDestroy) sub.reset();  // the callback holds the last reference
    r.board().set("callback_set", std::string("1"));
    if (waiter == Waiter::kTheCaller) {
      EXPECT_NO_THROW(w->wait());
    } else {
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::duration<double>(kWithin);
      while (!ran && std::chrono::steady_clock::now() < give_up) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_TRUE(ran) << "the all_reduce did not end, or its callback did not return";
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
    std::vector<int> everyone;
    for (int i = 0; i < pg->size(); ++i) everyone.push_back(i);
    ProcessGroupPtr sub = pg->new_group(everyone);
    Tensor t = floats(100);
    if (r.rank() == 1) {
      t.fill(7);
      r.board().wait({"callback_set"}, std::chrono::duration_cast<std::chrono::milliseconds>(kGroupTimeout));
      sub->send(t, 0)->wait();
    } else if (r.rank() == 0) {
      std::atomic<bool> ran{false};
      WorkPtr w = sub->recv(t, 1);
      w->on_finish([&ran, sub](std::exception_ptr) {
        sub->abort();
        ran = true;
      });
      r.board().set("callback_set", std::string("1"));
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::duration<double>(kWithin);
      while (!ran && std::chrono::steady_clock::now() < give_up) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      ASSERT_TRUE(ran) << "the recv did not end, or its callback did not return";
      EXPECT_TRUE(w->is_success());
      EXPECT_EQ(t.data_as<float>()[0], 7.0f);
      EXPECT_THROW(sub->barrier()->wait(), Error) << "an aborted group refuses later ops";
    }
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

}  // namespace
}  // namespace fault
}  // namespace distcomm
