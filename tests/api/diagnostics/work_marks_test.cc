// The core's marks on backends' Works (api/diagnostics/work_marks.h, refused_transfers.h):
// an ordinal epoch and a draining mark last until the op ends, and a Work destroyed without
// ending takes its marks with it, so that a later Work at the same address starts clean.
#include <exception>
#include <memory>

#include <gtest/gtest.h>

#include "api/diagnostics/refused_transfers.h"
#include "api/diagnostics/work_marks.h"
#include "api/work.h"

namespace distcomm {
namespace {

std::unique_ptr<Work> recv_work() { return std::make_unique<Work>(OpType::kRecv, 0, "recv p2p#0"); }

TEST(WorkMarks, MarksLastUntilTheOpEnds) {
  auto work = recv_work();
  note_ordinal_epoch(*work, 42);
  note_refusal_draining(*work);
  EXPECT_EQ(ordinal_epoch_of(work.get()), 42u);
  EXPECT_TRUE(refusal_draining(work.get()));
  work->finish(nullptr);
  EXPECT_EQ(ordinal_epoch_of(work.get()), 0u);
  EXPECT_FALSE(refusal_draining(work.get()));
}

TEST(WorkMarks, AWorkDestroyedWithoutEndingTakesItsMarksAlong) {
  auto work = recv_work();
  const Work* address = work.get();
  note_ordinal_epoch(*work, 7);
  note_refusal_draining(*work);
  work.reset();  // never finished (a backend that drops an op it gave up)
  // Only the address is looked up (never dereferenced): a later Work there would read these.
  EXPECT_EQ(ordinal_epoch_of(address), 0u);
  EXPECT_FALSE(refusal_draining(address));
}

TEST(WorkMarks, AZeroEpochIsNoMark) {
  auto work = recv_work();
  note_ordinal_epoch(*work, 0);
  EXPECT_EQ(ordinal_epoch_of(work.get()), 0u);
  work->finish(nullptr);
}

}  // namespace
}  // namespace distcomm
