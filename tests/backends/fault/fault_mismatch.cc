// Ranks that disagree on a collective. After a barrier (#0), rank 1 calls another op at #1
// than the others (ranks 0, 2, ...) do. Every rank must fail with Desync within the group's
// timeout + 2 s, whose table names what rank 1 runs there ("rank 1: ...") and what the
// others run ("ranks [0, 2]: ...", "ranks [0, 2, 3]: ..."); no rank's op may succeed (a value from a mismatched op is the
// silent corruption this suite exists to catch).
#include <functional>
#include <string>
#include <vector>

#include "api/process/failure_origin.h"
#include "api/errors.h"
#include "tests/backends/fault/fault_checks.h"
#include "tests/backends/fault/fault_suite.h"

namespace distcomm {
namespace fault {
namespace {

using testing::expect_failure_within;

constexpr int kCulprit = 1;

// Every rank: the barrier, then op(pg, this rank is the culprit), which must end in Desync.
// culprit_op / others_op: what the table must show on rank 1's line and on the others'
// ("" to leave a line unchecked).
void expect_desync(Runner& runner, const std::function<void(ProcessGroup&, bool culprit)>& op,
                   const std::string& culprit_op, const std::string& others_op, const std::string& also = "") {
  const bool in_processes = runner.backend() != "in_process";
  runner.run([&](Rank& r) {
    ProcessGroupPtr pg = r.join();
    pg->barrier()->wait();
    const std::string msg = expect_failure_within<Desync>([&] { op(*pg, r.rank() == kCulprit); }, 0, kWithin,
                                                          "the collective rank 1 disagrees on");
    if (!culprit_op.empty()) expect_table_line(msg, "rank 1:", culprit_op, "the Desync");
    if (!others_op.empty()) {
      expect_table_line(msg, "ranks " + rank_list(ranks_but(pg->size(), kCulprit)) + ":", others_op, "the Desync");
    }
    if (!also.empty()) expect_has(msg, also, "the Desync");
    // What run_main tells the launcher (FailureReport::consequence): a rank whose op another
    // rank's failure cut off adopted it; the rank that found the Desync did not. Where the
    // ranks are threads of one process (in_process) the flag is the process's, shared.
    if (in_processes) {
      const bool cut_off = msg.find("which cut this op off") != std::string::npos;
      EXPECT_EQ(latest_group_failure_was_adopted(), cut_off) << "rank " << r.rank() << ": " << msg;
    }
  });
}

TEST_P(FaultSuite, OpTypeDiffers) {
  expect_desync(
      runner(),
      [](ProcessGroup& pg, bool culprit) {
        Tensor t = floats(10);
        (culprit ? pg.broadcast(t) : pg.all_reduce(t))->wait();
      },
      "broadcast #1 float32[10] root 0", "all_reduce #1 float32[10] sum");
}

// all_reduce #1: `dtype`[count] on rank 1, float32[10] on ranks 0 and 2.
void all_reduce_tensors_differ(Runner& runner, DType dtype, int64_t count, const std::string& culprit_op) {
  expect_desync(
      runner,
      [dtype, count](ProcessGroup& pg, bool culprit) {
        Tensor t = culprit ? Tensor::zeros({count}, dtype) : floats(10);
        pg.all_reduce(t)->wait();
      },
      culprit_op, "all_reduce #1 float32[10] sum");
}

TEST_P(FaultSuite, CountDiffers) {
  all_reduce_tensors_differ(runner(), DType::kFloat32, 20, "all_reduce #1 float32[20] sum");
}

// The same 40 bytes on every rank: only the dtype tells the ops apart.
TEST_P(FaultSuite, DtypeDiffersWithTheSameBytes) {
  all_reduce_tensors_differ(runner(), DType::kInt32, 10, "all_reduce #1 int32[10] sum");
}

TEST_P(FaultSuite, Float64AgainstFloat32) {
  all_reduce_tensors_differ(runner(), DType::kFloat64, 10, "all_reduce #1 float64[10] sum");
}

// Rank 1 passes no elements. A backend may skip moving data for an empty tensor, but not
// the meeting: a rank that returned at once would leave the others waiting out the timeout
// for it, or go on to its next op and meet theirs there.
TEST_P(FaultSuite, EmptyTensorOnOneRank) {
  all_reduce_tensors_differ(runner(), DType::kFloat32, 0, "all_reduce #1 float32[0] sum");
}

// The same, where the count that must agree is an input's (all_gather's).
TEST_P(FaultSuite, EmptyInputOnOneRank) {
  expect_desync(
      runner(),
      [](ProcessGroup& pg, bool culprit) {
        const int64_t n = culprit ? 0 : 10;
        Tensor in = floats(n), out = floats(n * pg.size());
        pg.all_gather_into_tensor(out, in)->wait();
      },
      "all_gather #1 float32[0]", "all_gather #1 float32[10]");
}

TEST_P(FaultSuite, ReduceOpDiffers) {
  expect_desync(
      runner(),
      [](ProcessGroup& pg, bool culprit) {
        Tensor t = floats(10);
        AllReduceOptions o;
        o.op = culprit ? ReduceOp::MAX : ReduceOp::SUM;
        pg.all_reduce(t, o)->wait();
      },
      "all_reduce #1 float32[10] max", "all_reduce #1 float32[10] sum");
}

// Rank 1 broadcasts its own tensor; the others take rank 0's. Ranks 2 and up agree with
// rank 0, and still must not return: the collective as a whole is not one. Where the
// backend lets a rank whose messages all pair with ranks that agree with it finish
// (fault_differences.cc), they may return, but with rank 0's tensor only.
TEST_P(FaultSuite, RootDiffers) {
  const bool bystander_may_finish = !differs("a bystander that agrees with the root finishes").empty();
  runner().run([&](Rank& r) {
    ProcessGroupPtr pg = r.join();
    pg->barrier()->wait();
    Tensor t = floats(10);
    t.fill(r.rank() + 1);
    BroadcastOptions o;
    o.root = r.rank() == kCulprit ? 1 : 0;
    auto broadcast = [&] { pg->broadcast(t, o)->wait(); };
    if (r.rank() >= 2 && bystander_may_finish) {
      try {
        broadcast();
        for (int64_t i = 0; i < t.numel(); ++i) EXPECT_EQ(t.item(i), 1) << "element " << i << ": not rank 0's";
      } catch (const Desync&) {
      }
      return;
    }
    const std::string msg = expect_failure_within<Desync>(broadcast, 0, kWithin, "the broadcast rank 1 disagrees on");
    expect_table_line(msg, "rank 1:", "broadcast #1 float32[10] root 1", "the Desync");
    if (bystander_may_finish) {
      expect_has(msg, "broadcast #1 float32[10] root 0", "the Desync");  // rank 0's line, the bystanders' if there
    } else {
      expect_table_line(msg, "ranks " + rank_list(ranks_but(pg->size(), kCulprit)) + ":",
                        "broadcast #1 float32[10] root 0", "the Desync");
    }
  });
}

// all_to_all_single of 2 floats to every rank, but rank 1 splits its input [1, 2, 3, 2, ...]
// (what it sends itself still matches what it expects from itself): its transfers to ranks
// 0 and 2 do not pair up. Rank 3 and up exchange only transfers that do; where the backend
// checks pairs alone (fault_differences.cc), such a rank may finish, with exactly what each
// peer sent it (rank 1's splits 1 + 2 + 3 put this rank's share where even ones would).
TEST_P(FaultSuite, AllToAllSplitsDoNotPair) {
  const bool paired_rank_may_finish = !differs("a rank whose transfers all pair up finishes").empty();
  runner().run([&](Rank& r) {
    ProcessGroupPtr pg = r.join();
    pg->barrier()->wait();
    const int size = pg->size();
    Tensor in = floats(2 * size), out = floats(2 * size);
    for (int64_t i = 0; i < in.numel(); ++i) in.data_as<float>()[i] = static_cast<float>(100 * r.rank() + i);
    const std::vector<int64_t> even(static_cast<size_t>(size), 2);
    std::vector<int64_t> sends = even;
    if (r.rank() == kCulprit) {
      sends[0] = 1;
      sends[2] = 3;
    }
    auto exchange = [&] { pg->all_to_all_single(out, in, even, sends)->wait(); };
    if (r.rank() >= 3 && paired_rank_may_finish) {
      try {
        exchange();
      } catch (const Desync&) {
        return;
      }
      for (int p = 0; p < size; ++p) {
        for (int64_t k = 0; k < 2; ++k) {
          EXPECT_EQ(out.item(2 * p + k), 100 * p + 2 * r.rank() + k) << "rank " << r.rank() << ": from rank " << p;
        }
      }
      return;
    }
    const std::string msg = expect_failure_within<Desync>(exchange, 0, kWithin, "the all_to_all rank 1 splits wrongly");
    expect_has(msg, "rank 1 sends 1 elements to rank 0, which expects 2", "the Desync");
  });
}

// Rank 1 runs an all_reduce the others do not (a metric only it logs); they go on to a
// barrier, which meets the extra op at #1.
TEST_P(FaultSuite, ExtraCollective) {
  expect_desync(
      runner(),
      [](ProcessGroup& pg, bool culprit) {
        if (culprit) {
          Tensor t = floats(10);
          pg.all_reduce(t)->wait();
        }
        pg.barrier()->wait();
      },
      "all_reduce #1 float32[10] sum", "barrier #1");
}

}  // namespace
}  // namespace fault
}  // namespace distcomm
