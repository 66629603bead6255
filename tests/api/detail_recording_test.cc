// DISTCOMM_DEBUG=DETAIL's checks run inside the op's recording (ProcessGroup::issue): a
// Desync they raise is the op's failure to issue in the flight recorder -- so the dump a
// Desync writes shows the op -- for every kind of collective (a reducing one and a rooted
// one), and the group stays usable. 3 ranks of one process (the in_process test plugin).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "api/errors.h"
#include "tests/testing/in_process_group.h"

namespace distcomm {
namespace {

std::vector<ProcessGroupPtr> detail_world() {
  testing::InProcessOptions o;
  o.debug = DebugLevel::kDetail;
  return testing::in_process_world(3, o);
}

// The last op in this rank's recorder: failed, with the Desync's words.
void expect_recorded_desync(ProcessGroup& pg, const char* op_name) {
  ASSERT_TRUE(pg.recorder());
  const std::vector<TraceEntry> ops = pg.recorder()->snapshot();
  ASSERT_FALSE(ops.empty()) << "rank " << pg.rank() << ": the refused " << op_name << " was not recorded";
  const TraceEntry& last = ops.back();
  EXPECT_EQ(last.state, TraceEntry::State::kFailed) << "rank " << pg.rank() << " " << op_name;
  EXPECT_NE(last.error.find("Desync"), std::string::npos) << "rank " << pg.rank() << ": " << last.error;
  EXPECT_NE(last.error.find("DISTCOMM_DEBUG=DETAIL"), std::string::npos) << last.error;
  // Said once, as what found it: not also as advice to turn on what is on (helper-88).
  EXPECT_EQ(last.error.find("DISTCOMM_DEBUG=DETAIL"), last.error.rfind("DISTCOMM_DEBUG=DETAIL")) << last.error;
}

TEST(DetailRecording, ADesyncOfAReducingOpIsRecordedAsItsFailure) {
  testing::on_every_rank(detail_world(), [](ProcessGroup& pg) {
    // Rank 2 reduces 4 elements, the others 3.
    Tensor t = Tensor::of<float>(std::vector<float>(pg.rank() == 2 ? 4 : 3, 1.0f));
    EXPECT_THROW(pg.all_reduce(t), Desync);
    expect_recorded_desync(pg, "all_reduce");
    Tensor same = Tensor::of<float>({1.0f, 1.0f});
    pg.all_reduce(same)->wait();  // nothing was issued: the group goes on
    EXPECT_EQ(same.item(0), 3.0);
  });
}

TEST(DetailRecording, ADesyncOfARootedOpIsRecordedAsItsFailure) {
  testing::on_every_rank(detail_world(), [](ProcessGroup& pg) {
    // Rank 1 names another root.
    Tensor t = Tensor::of<float>({1.0f, 1.0f});
    BroadcastOptions opts;
    opts.root = pg.rank() == 1 ? 1 : 0;
    EXPECT_THROW(pg.broadcast(t, opts), Desync);
    expect_recorded_desync(pg, "broadcast");
  });
}

}  // namespace
}  // namespace distcomm
