// The shm engine's queue of ops (backends/shm/shm_task_ring.h): first in, first out across
// its wrap-around and while it grows, every item destroyed exactly once, items that can be
// moved but not assigned (as the engine's CollectiveTask), and the count of items that left.
#include "backends/shm/shm_task_ring.h"

#include <gtest/gtest.h>

#include <memory>

namespace distcomm {
namespace shm {
namespace {

int g_live = 0;  // items constructed and not yet destroyed (moved-from ones included)

struct Item {
  explicit Item(int v) : value(std::make_unique<int>(v)) { ++g_live; }
  Item(Item&& o) noexcept : value(std::move(o.value)) { ++g_live; }
  Item& operator=(Item&&) = delete;
  ~Item() { --g_live; }
  std::unique_ptr<int> value;
};

TEST(ShmTaskRing, KeepsOrderAcrossWrapAroundAndGrowth) {
  g_live = 0;
  {
    TaskRing<Item> ring;
    int pushed = 0, popped = 0;
    // Push 5, pop 3, again and again: the front walks around the buffer, and the ring grows
    // (8, 16, 32) while its items wrap around its end.
    for (int step = 0; step < 20; ++step) {
      for (int i = 0; i < 5; ++i) ring.push_back(Item(pushed++));
      for (int i = 0; i < 3; ++i) {
        ASSERT_FALSE(ring.empty());
        ASSERT_EQ(*ring.front().value, popped);
        ring.pop_front();
        ++popped;
      }
      ASSERT_EQ(ring.size(), static_cast<size_t>(pushed - popped));
      for (size_t i = 0; i < ring.size(); ++i) ASSERT_EQ(*ring[i].value, popped + static_cast<int>(i));
      ASSERT_EQ(g_live, pushed - popped);  // no item lost or left behind by a move
      ASSERT_EQ(ring.pops(), static_cast<uint64_t>(popped));
    }
    while (!ring.empty()) {
      ASSERT_EQ(*ring.front().value, popped++);
      ring.pop_front();
    }
    EXPECT_EQ(popped, pushed);
    EXPECT_EQ(g_live, 0);
    // Reused after running empty.
    ring.push_back(Item(7));
    ring.push_back(Item(8));
    EXPECT_EQ(*ring.front().value, 7);
    EXPECT_EQ(g_live, 2);
  }
  EXPECT_EQ(g_live, 0);  // the destructor destroys what is left
}

TEST(ShmTaskRing, ClearDestroysEveryItem) {
  g_live = 0;
  TaskRing<Item> ring;
  for (int i = 0; i < 11; ++i) ring.push_back(Item(i));
  ring.pop_front();
  EXPECT_EQ(ring.pops(), 1u);
  ring.clear();
  EXPECT_TRUE(ring.empty());
  EXPECT_EQ(g_live, 0);
  EXPECT_EQ(ring.pops(), 11u);  // what the engine counts to find an op it pushed (Engine::submit)
  ring.push_back(Item(3));
  EXPECT_EQ(*ring.front().value, 3);
  EXPECT_EQ(ring.size(), 1u);
}

}  // namespace
}  // namespace shm
}  // namespace distcomm
