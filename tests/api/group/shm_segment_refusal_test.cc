// How the shm plugin words a segment that would not fit ulimit -f when "auto" asks ahead of a
// group's creation (backends/shm/shm_segment_refusal.h). It rewords Segment::create's refusal;
// where that refusal's wording changes, the sentence must come through as it is: the
// rewording used std::string::replace at find()'s answer, which threw std::out_of_range at
// npos, and the plugin's answer to auto then said "fits" (its catch-all), so that the group's
// creation died under the limit instead of running gloo.
#include "backends/shm/shm_segment_refusal.h"

#include <gtest/gtest.h>

namespace distcomm {
namespace shm {
namespace {

TEST(ShmSegmentRefusal, NamesTheSegmentJudgedAndDropsThePrefix) {
  EXPECT_EQ(segment_refusal("shm: this rank's segment needs 10 bytes, over ulimit -f", "a rank's segment (4 ranks)"),
            "a rank's segment (4 ranks) needs 10 bytes, over ulimit -f");
}

TEST(ShmSegmentRefusal, AnotherWordingComesThroughAsItIs) {
  EXPECT_EQ(segment_refusal("shm: the segment needs 10 bytes, over ulimit -f", "a rank's segment (4 ranks)"),
            "the segment needs 10 bytes, over ulimit -f");
  EXPECT_EQ(segment_refusal("segment too large for ulimit -f", "a rank's segment (4 ranks)"),
            "segment too large for ulimit -f");
  EXPECT_EQ(segment_refusal("", "a rank's segment (4 ranks)"), "");
}

}  // namespace
}  // namespace shm
}  // namespace distcomm
