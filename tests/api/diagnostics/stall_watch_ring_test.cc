// The stall watch's record of the last collective (api/diagnostics/stall_watch_ring.h): read
// from the ring's entry while the ring holds it, copied out as the ring reuses the entry, and
// in either place it says what the reports said when the watch copied every collective's
// fingerprint and kept a weak Work apart: the collective, and whether it has finished.
// And copy_fingerprint (op_fingerprint_copy.h), which the ring and the flight recorder use.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "api/diagnostics/op_fingerprint_copy.h"
#include "api/diagnostics/stall_watch_ring.h"

namespace distcomm {
namespace internal {
namespace {

constexpr size_t kRing = 4;

struct Ring {
  std::vector<StallWatchEntry> entries = std::vector<StallWatchEntry>(kRing);
  LastCollective last;
  uint64_t issued = 0;

  // As StallWatch::issued writes an entry (its sweep aside).
  WorkPtr issue(OpType op, bool p2p) {
    auto work = std::make_shared<Work>(op, issued, "");
    last.before_entry_reused(issued, entries);
    if (!p2p) last.issued(issued);
    StallWatchEntry& e = entries[issued % kRing];
    OpFingerprint f;
    f.op = op;
    f.p2p = p2p;
    f.seq = issued;
    copy_fingerprint(e.fingerprint, f);
    e.work = work;
    e.finished = false;
    ++issued;
    return work;
  }
  ProgressReport report() const {
    ProgressReport r;
    last.report(r, entries);
    return r;
  }
};

TEST(StallWatchRingLastCollective, NoneBeforeTheFirstCollective) {
  Ring ring;
  for (int i = 0; i < 9; ++i) ring.issue(OpType::kSend, true)->finish();
  EXPECT_FALSE(ring.report().last_collective.has_value());
}

TEST(StallWatchRingLastCollective, ReadFromTheRingWhileItHoldsTheEntry) {
  Ring ring;
  WorkPtr broadcast = ring.issue(OpType::kBroadcast, false);
  ring.issue(OpType::kSend, true)->finish();
  ProgressReport r = ring.report();
  ASSERT_TRUE(r.last_collective.has_value());
  EXPECT_EQ(r.last_collective->op, OpType::kBroadcast);
  EXPECT_EQ(r.last_collective->seq, 0u);
  EXPECT_FALSE(r.last_collective_finished);
  broadcast->finish();
  EXPECT_TRUE(ring.report().last_collective_finished);
  // Swept (the watch lets go of a finished op's Work): still finished.
  ring.entries[0].work.reset();
  ring.entries[0].finished = true;
  EXPECT_TRUE(ring.report().last_collective_finished);
}

TEST(StallWatchRingLastCollective, CopiedOutWhenTheRingReusesItsEntryRunningOrFinished) {
  Ring ring;
  WorkPtr broadcast = ring.issue(OpType::kBroadcast, false);
  for (size_t i = 0; i < 3 * kRing; ++i) ring.issue(OpType::kSend, true)->finish();
  ProgressReport r = ring.report();
  ASSERT_TRUE(r.last_collective.has_value()) << "more point-to-point ops than the ring holds must not hide it";
  EXPECT_EQ(r.last_collective->op, OpType::kBroadcast);
  EXPECT_EQ(r.last_collective->seq, 0u);
  EXPECT_FALSE(r.last_collective_finished) << "its Work still runs";
  broadcast->finish();
  EXPECT_TRUE(ring.report().last_collective_finished);
  broadcast.reset();  // let go of by every holder: expired, so finished
  EXPECT_TRUE(ring.report().last_collective_finished);
}

TEST(StallWatchRingLastCollective, ALaterCollectiveTakesItsPlace) {
  Ring ring;
  ring.issue(OpType::kBroadcast, false)->finish();
  for (size_t i = 0; i < kRing; ++i) ring.issue(OpType::kSend, true)->finish();  // copied out
  WorkPtr all_reduce = ring.issue(OpType::kAllReduce, false);
  ProgressReport r = ring.report();
  ASSERT_TRUE(r.last_collective.has_value());
  EXPECT_EQ(r.last_collective->op, OpType::kAllReduce);
  EXPECT_FALSE(r.last_collective_finished);
  all_reduce->finish();
}

TEST(CopyFingerprint, CopiesEveryFieldAndTheSplits) {
  OpFingerprint from;
  from.op = OpType::kAllToAll;
  from.seq = 17;
  from.p2p = true;
  from.internal = true;
  from.has_tensor = true;
  from.dtype = DType::kInt64;
  from.count = 12;
  from.ndim = 2;
  from.dims[0] = 3;
  from.dims[1] = 4;
  from.dims[5] = 9;
  from.root = 2;
  from.tag = 5;
  from.ordinal = 7;
  from.has_reduction = true;
  from.reduction = ReduceOp::premul_sum(0.5);
  from.send_counts = {1, 2};
  from.recv_counts = {3};
  OpFingerprint to;
  copy_fingerprint(to, from);
  EXPECT_EQ(to.encode(), from.encode());
  EXPECT_EQ(to.send_counts, from.send_counts);
  EXPECT_EQ(to.recv_counts, from.recv_counts);
  EXPECT_EQ(to.reduction.kind, ReduceOp::PREMUL_SUM);
  EXPECT_EQ(to.reduction.factor, 0.5);
  EXPECT_EQ(to.internal, true);
  EXPECT_EQ(to.dims[5], 9);
  // Back to a fingerprint without splits: they are emptied, not kept from before.
  copy_fingerprint(to, OpFingerprint());
  EXPECT_TRUE(to.send_counts.empty());
  EXPECT_TRUE(to.recv_counts.empty());
  EXPECT_EQ(to.encode(), OpFingerprint().encode());
}

}  // namespace
}  // namespace internal
}  // namespace distcomm
