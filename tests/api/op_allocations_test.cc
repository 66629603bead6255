// What the core allocates per op: nothing, on the path an op that ends within its backend's
// call takes (numbering, description, the flight recorder, the record of what it writes).
// Counted with this binary's own operator new, which the core's and the plugin's calls
// resolve to, over a group of one on the single_rank test plugin, whose op allocates twice
// itself: its Work (make_shared) and the copy of the op's description the Work keeps.
// Before the core described into a reused buffer and recorded ended ops without a
// callback, an all_reduce cost 4 allocations here; a heap allocation and its free are
// ~200 of the ~7,000 instructions of a small op (tools/bench/op_instructions.sh).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "api/store/hash_store.h"
#include "api/process_group.h"
#include "tests/api/plugin_test_env.h"

namespace {

std::atomic<long> g_allocations{0};

void* allocate(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}

}  // namespace

void* operator new(std::size_t n) { return allocate(n); }
void* operator new[](std::size_t n) { return allocate(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace distcomm {
namespace {

// The single_rank plugin's own allocations per op (its Work and the description it copies).
constexpr long kPluginAllocationsPerOp = 2;

ProcessGroupPtr single_rank_group() {
  use_test_plugins();
  ProcessGroupOptions o;
  o.store = std::make_shared<HashStore>();
  o.backend = "single_rank";
  return ProcessGroup::create(o);
}

// Allocations per call of op over n calls, after warm-up calls that fill what is kept
// from op to op (the description's buffer, the recorder's ring).
template <typename Op>
double allocations_per_op(Op op) {
  for (int i = 0; i < 50; ++i) op();
  constexpr int kOps = 1000;
  const long before = g_allocations.load();
  for (int i = 0; i < kOps; ++i) op();
  return static_cast<double>(g_allocations.load() - before) / kOps;
}

TEST(OpAllocations, AnAllReduceThatEndsInItsCallAllocatesNothingInTheCore) {
  ProcessGroupPtr pg = single_rank_group();
  ASSERT_TRUE(pg->recorder()) << "the flight recorder is on by default, and its cost is what this counts";
  Tensor t = Tensor::zeros({2});
  const double per_op = allocations_per_op([&] { pg->all_reduce(t)->wait(); });
  EXPECT_LE(per_op, kPluginAllocationsPerOp) << "the core allocates per all_reduce";
}

TEST(OpAllocations, ABroadcastAndABarrierAllocateNothingInTheCore) {
  ProcessGroupPtr pg = single_rank_group();
  Tensor t = Tensor::zeros({3, 2});
  EXPECT_LE(allocations_per_op([&] { pg->broadcast(t)->wait(); }), kPluginAllocationsPerOp);
  EXPECT_LE(allocations_per_op([&] { pg->barrier()->wait(); }), kPluginAllocationsPerOp);
}

}  // namespace
}  // namespace distcomm
