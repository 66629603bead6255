// The pool that keeps CUDA events for reuse (object_pool.h), with integers for events.
#include "backends/nccl/object_pool.h"

#include <gtest/gtest.h>

#include <thread>

namespace distcomm {
namespace nccl {
namespace {

struct Counts {
  int made = 0;
  std::vector<int> destroyed;
};

TEST(ObjectPoolTest, ReusesWhatIsGivenBackAndKeepsABoundedNumber) {
  Counts c;
  {
    ObjectPool<int> pool([&] { return ++c.made; }, [&](int e) { c.destroyed.push_back(e); }, 2);
    const int a = pool.take(), b = pool.take(), d = pool.take();
    EXPECT_EQ(c.made, 3);
    pool.give_back(a);
    pool.give_back(b);
    pool.give_back(d);  // a third is more than it keeps
    EXPECT_EQ(c.destroyed, std::vector<int>{d});
    EXPECT_EQ(pool.kept(), 2u);
    EXPECT_EQ(pool.take(), b);
    EXPECT_EQ(pool.take(), a);
    EXPECT_EQ(c.made, 3) << "events given back are taken again, not made";
    pool.give_back(a);
  }
  EXPECT_EQ(c.destroyed, (std::vector<int>{3, 1})) << "what the pool keeps is destroyed with it";
}

TEST(ObjectPoolTest, ManyThreadsTakeAndGiveBack) {
  std::atomic<int> made{0}, destroyed{0};
  {
    ObjectPool<int> pool([&] { return ++made; }, [&](int) { ++destroyed; }, 64);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < 1000; ++i) pool.give_back(pool.take());
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_LE(made, 4) << "at most one event per thread in flight at a time";
  }
  EXPECT_EQ(made, destroyed);
}

}  // namespace
}  // namespace nccl
}  // namespace distcomm
