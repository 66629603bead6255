// OpOverlaps (api/ops/op_overlaps.h): a list op waits only for the group's earlier ops whose
// memory overlaps, and a group with no write-back in flight pays one atomic load per op.
#include "api/ops/op_overlaps.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace distcomm {
namespace {

WorkPtr in_flight() { return std::make_shared<Work>(OpType::kAllReduce, 1, "test op"); }

// Finishes w after `after`, from another thread; the returned thread must be joined.
std::thread finish_later(const WorkPtr& w, std::chrono::milliseconds after, std::atomic<bool>& finished) {
  return std::thread([w, after, &finished] {
    std::this_thread::sleep_for(after);
    finished = true;
    w->finish();
  });
}

TEST(OpOverlaps, APackWaitsForAnEarlierWriterOfItsInputsOnly) {
  OpOverlaps overlaps;
  Tensor buffer = Tensor::zeros({100});
  Tensor a = buffer.flat_slice(0, 50), b = buffer.flat_slice(50, 50);
  WorkPtr writes_a = in_flight();
  overlaps.record_output(writes_a, a);
  overlaps.wait_for_writers({b});  // other memory: returns at once
  EXPECT_FALSE(writes_a->is_completed());
  std::atomic<bool> finished{false};
  std::thread t = finish_later(writes_a, std::chrono::milliseconds(50), finished);
  overlaps.wait_for_writers({buffer.flat_slice(49, 2)});  // one element of a
  EXPECT_TRUE(finished);
  t.join();
}

TEST(OpOverlaps, AnOpWaitsForAWriteBackOverItsTensors) {
  OpOverlaps overlaps;
  Tensor target = Tensor::zeros({10}), other = Tensor::zeros({10});
  WorkPtr write_back = in_flight();
  overlaps.record_write_back(write_back, std::vector<Tensor>{target});
  overlaps.wait_for_write_backs(&other);
  EXPECT_FALSE(write_back->is_completed());
  std::atomic<bool> finished{false};
  std::thread t = finish_later(write_back, std::chrono::milliseconds(50), finished);
  overlaps.wait_for_write_backs(&other, &target);
  EXPECT_TRUE(finished);
  t.join();
  // A pack waits for write-backs too (an ended one at once).
  overlaps.wait_for_writers({target});
}

// An outside user's probe posted 8000 recvs between two ranks: each record scanned every
// entry in flight, so posting took 2-8 s (O(n^2)). The scans now look at O(1) entries an op.
TEST(OpOverlaps, ThousandsInFlightCostLinearScans) {
  OpOverlaps overlaps;
  constexpr size_t kInFlight = 5000;
  std::vector<WorkPtr> works;
  std::vector<Tensor> outputs;
  for (size_t i = 0; i < kInFlight; ++i) {
    works.push_back(in_flight());
    outputs.push_back(Tensor::zeros({2}));
    overlaps.record_output(works.back(), outputs.back());
  }
  EXPECT_LE(overlaps.output_entries_scanned(), 3 * kInFlight) << "scans grow with the ops in flight";
  for (const WorkPtr& w : works) w->finish();
  // Ended entries still go: recording more after they ended leaves few.
  Tensor t = Tensor::zeros({4});
  for (size_t i = 0; i < 2 * kInFlight + 2; ++i) {
    WorkPtr done = in_flight();
    done->finish();
    overlaps.record_output(done, t);
  }
  EXPECT_LE(overlaps.output_entries_scanned(), 10 * kInFlight);
}

TEST(OpOverlaps, ManyRecordedOpsStayFew) {
  OpOverlaps overlaps;
  Tensor t = Tensor::zeros({4});
  WorkPtr done = in_flight();
  done->finish();
  constexpr int kOps = 200000;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kOps; ++i) {
    overlaps.wait_for_write_backs(&t);
    overlaps.record_output(done, t);
  }
  const double ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() / kOps;
  std::printf("per op (check + record of an ended op): %.1f ns\n", ns);
  // An ended writer is never waited for; the record holds at most kCapacity of them.
  overlaps.wait_for_writers({t});
  EXPECT_LE(done.use_count(), 1 + static_cast<long>(OpOverlaps::kCapacity));
}

// An op that ended within its backend's call (an op of a group of one, a small op whose
// peers were there first) is not kept: nothing waits for it, and while nothing is kept its
// record takes no lock.
TEST(OpOverlaps, AnOpThatHasEndedIsNotKept) {
  OpOverlaps overlaps;
  Tensor t = Tensor::zeros({4});
  WorkPtr done = in_flight();
  done->finish();
  overlaps.record_output(done, t);
  EXPECT_EQ(done.use_count(), 1) << "an ended op's Work is held by the record";
  WorkPtr running = in_flight();
  overlaps.record_output(running, t);
  EXPECT_EQ(running.use_count(), 2) << "an op in flight is recorded";
  running->finish();
}

// Ended ops that are not kept still count towards the next scan: the ops after a burst,
// even if each ends within its call, drop the burst's entries once it has ended.
TEST(OpOverlaps, OpsThatEndAtOnceStillDropABurstThatEnded) {
  OpOverlaps overlaps;
  constexpr size_t kBurst = 100;
  std::vector<WorkPtr> burst;
  std::vector<Tensor> outputs;
  for (size_t i = 0; i < kBurst; ++i) {
    burst.push_back(in_flight());
    outputs.push_back(Tensor::zeros({2}));
    overlaps.record_output(burst.back(), outputs.back());
  }
  for (const WorkPtr& w : burst) w->finish();
  Tensor t = Tensor::zeros({4});
  for (size_t i = 0; i < 2 * kBurst + 2; ++i) {
    WorkPtr done = in_flight();
    done->finish();
    overlaps.record_output(done, t);
  }
  for (const WorkPtr& w : burst) EXPECT_EQ(w.use_count(), 1) << "the burst's ended entries are still held";
}

}  // namespace
}  // namespace distcomm
