// Every collective round's inline line carries a tag (round + 1) that tells a reader the
// line holds that round's data. The tag is 64-bit: a 32-bit one repeats every 2^32 rounds,
// and a line whose last use was k * 2^32 rounds earlier (or that was never used: tag 0,
// which is round 2^32 - 1's) would be taken for the current round, data the peer has not
// written (at a million small ops a second, 72 minutes into a job). The test starts the
// group's rounds at 2^32 - 1 (shm_first_round, the same on every rank) and runs ops across
// 2^32: the first round's lines were never written, and the reader must wait for them.
#include <chrono>
#include <string>

#include <gtest/gtest.h>

#include "api/errors.h"
#include "tests/backends/shm/shm_test_tensors.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace {

using std::chrono::milliseconds;
using testing::expect_all;
using testing::filled;
using testing::GroupHarnessOptions;
using testing::run_group;

constexpr uint64_t kFirstRound = (uint64_t{1} << 32) - 1;

TEST(ShmRoundTags, RoundsRunAcross2To32AndANeverWrittenLineIsNotTakenForARound) {
  GroupHarnessOptions options;
  options.backend_config = {{"shm_first_round", std::to_string(kFirstRound)}, {"shm_slots", "2"}};
  run_group(2, "shm", [](ProcessGroup& pg) {
    // Rank 0 posts round 2^32 - 1 and looks at rank 1's line of it before rank 1 has
    // written it: the line's tag is 0, the 32-bit tag of that round.
    Tensor first = filled(2, static_cast<float>(pg.rank() + 1));  // 8 bytes: inline
    if (pg.rank() == 0) {
      WorkPtr w = pg.all_reduce(first);  // written and posted by this call
      pg.store()->set("test/rank0_waits", "1");
      w->wait();
    } else {
      pg.store()->wait({"test/rank0_waits"}, milliseconds(30000));
      pg.all_reduce(first)->wait();
    }
    expect_all(first, 3.0, "the all_reduce of round 2^32 - 1");

    // Past 2^32, inline and slot rounds (each line and slot reused every other round),
    // several in flight, each with its own values.
    struct Op {
      WorkPtr work;
      Tensor tensor;
      double expected;
    };
    std::vector<Op> ops;
    for (int i = 0; i < 24; ++i) {
      const float mine = static_cast<float>((pg.rank() + 1) * (i + 1));
      Tensor small = filled(4, mine);
      ops.push_back({pg.all_reduce(small), small, 3.0 * (i + 1)});
      Tensor large = filled(1000, mine);  // through the slot
      ops.push_back({pg.all_reduce(large), large, 3.0 * (i + 1)});
      ops.push_back({pg.barrier(), Tensor(), 0});
    }
    for (auto it = ops.rbegin(); it != ops.rend(); ++it) it->work->wait();
    for (size_t k = 0; k < ops.size(); ++k) {
      if (ops[k].tensor.numel() > 0) expect_all(ops[k].tensor, ops[k].expected, "op " + std::to_string(k));
    }
  }, options);
}

TEST(ShmRoundTags, FirstRoundMustAgree) {
  run_group(2, "shm", [](ProcessGroup& world) {
    ProcessGroupOptions o;
    o.store = world.store();
    o.rank = world.rank();
    o.size = world.size();
    o.backend = "shm";
    o.group_name = "first_round_differs";
    o.timeout = milliseconds(20000);
    o.backend_config["shm_first_round"] = world.rank() == 0 ? "0" : "7";
    try {
      ProcessGroup::create(o);
      ADD_FAILURE() << "ranks with different shm_first_round made a group";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("first_round"), std::string::npos) << e.what();
    }
  });
}

}  // namespace
}  // namespace distcomm
