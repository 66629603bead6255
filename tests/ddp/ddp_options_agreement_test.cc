// DdpOptions that differ between ranks are refused at construction, on every rank, naming the
// option, the values and the ranks -- in the round that compares the parameters -- rather
// than failing later with a Desync naming DDP's internal ops, a hang, or (log_every_n on
// one rank with the ordered logging) a later ordered_print of the program's printing another
// rank's DDP line. gradient_as_bucket_view alone may differ. 3 ranks over the in_process
// test plugin (one thread each).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "api/errors.h"
#include "ddp/distributed_data_parallel.h"
#include "tests/testing/in_process_group.h"

namespace distcomm {
namespace ddp {
namespace {

using distcomm::testing::in_process_world;
using distcomm::testing::on_every_rank;

struct Model {
  std::vector<Tensor> values, grads;
  std::vector<NamedParameter> params;
  Model() {
    for (int p = 0; p < 3; ++p) {
      values.push_back(Tensor::zeros({4}));
      grads.push_back(Tensor::zeros({4}));
    }
    for (int p = 0; p < 3; ++p) params.push_back({"p" + std::to_string(p), &values[p], &grads[p]});
  }
};

// What constructing DDP throws on this rank ("" when it does not).
std::string construction_error(ProcessGroup& pg, const DdpOptions& options, std::vector<NamedBuffer> buffers = {}) {
  Model m;
  try {
    DistributedDataParallel ddp(pg, m.params, options, std::move(buffers));
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

struct Case {
  std::string expected;                        // the message's piece naming the option
  std::function<void(DdpOptions&, int)> set;  // the options of rank `rank`
};

TEST(DdpOptionsAgreement, AnOptionThatDiffersIsRefusedOnEveryRankNamingItTheValuesAndTheRanks) {
  const std::vector<Case> cases = {
      {"bucket_cap_mb differs between ranks: 25 on ranks 0, 2; 0.5 on rank 1",
       [](DdpOptions& o, int r) { o.bucket_cap_mb = r == 1 ? 0.5 : 25; }},
      {"first_bucket_cap_mb differs between ranks: 1 on ranks 0, 2; 0.1 on rank 1",
       [](DdpOptions& o, int r) { o.first_bucket_cap_mb = r == 1 ? 0.1 : 1; }},
      {"find_unused_parameters differs between ranks: false on ranks 0, 2; true on rank 1",
       [](DdpOptions& o, int r) { o.find_unused_parameters = r == 1; }},
      {"broadcast_buffers differs between ranks: true on ranks 0, 2; false on rank 1",
       [](DdpOptions& o, int r) { o.broadcast_buffers = r != 1; }},
      {"rebuild_buckets differs between ranks: true on ranks 0, 2; false on rank 1",
       [](DdpOptions& o, int r) { o.rebuild_buckets = r != 1; }},
      {"comm_hook differs between ranks: allreduce_hook on ranks 0, 2; fp16_compress_hook on rank 1",
       [](DdpOptions& o, int r) {
         if (r == 1) o.comm_hook = fp16_compress_hook();
       }},
      {"comm_hook differs between ranks: allreduce_hook on ranks 0, 2; a hook of the program's own on rank 1",
       [](DdpOptions& o, int r) {
         if (r == 1) o.comm_hook = [](ProcessGroup& g, GradBucket& b) { return g.all_reduce(b.buffer); };
       }},
      // The user's two: on rank 1 only its DDP lines went into rank 0's next ordered_print;
      // on rank 0 only, the ranks hung until the group's timeout.
      {"ordered logging (log_every_n with LogMode::kOrdered) differs between ranks: none on ranks 0, 2; every 1 "
       "iteration on rank 1",
       [](DdpOptions& o, int r) { o.log_every_n = r == 1 ? 1 : 0; }},
      {"ordered logging (log_every_n with LogMode::kOrdered) differs between ranks: every 1 iteration on rank 0; "
       "none on ranks 1, 2",
       [](DdpOptions& o, int r) { o.log_every_n = r == 0 ? 1 : 0; }},
      {"ordered logging (log_every_n with LogMode::kOrdered) differs between ranks: every 5 iterations on ranks 0, "
       "2; none on rank 1",
       [](DdpOptions& o, int r) {
         o.log_every_n = 5;
         if (r == 1) o.log_mode = LogMode::kRankZero;
       }},
  };
  auto world = in_process_world(3);
  on_every_rank(world, [&](ProcessGroup& pg) {
    Tensor buffer = Tensor::zeros({2});
    for (const Case& c : cases) {
      SCOPED_TRACE(c.expected);
      DdpOptions options;
      c.set(options, pg.rank());
      const std::string m = construction_error(pg, options, {{"buffer", &buffer}});
      EXPECT_NE(m.find(c.expected), std::string::npos) << m;
      EXPECT_NE(m.find("Every rank must pass the same DdpOptions"), std::string::npos) << m;
      EXPECT_EQ(m.find("wrap the same parameters"), std::string::npos) << "advice that does not fit: " << m;
      EXPECT_NE(m.find("rank " + std::to_string(pg.rank()) + "/3"), std::string::npos) << m;
    }
    // Two options at once: both named.
    DdpOptions two;
    two.find_unused_parameters = pg.rank() == 2;
    two.rebuild_buckets = pg.rank() != 2;
    const std::string m = construction_error(pg, two);
    EXPECT_NE(m.find("find_unused_parameters differs between ranks: false on ranks 0, 1; true on rank 2. "
                     "rebuild_buckets differs between ranks: true on ranks 0, 1; false on rank 2. "),
              std::string::npos)
        << m;
    // Logging that is no collective may differ: every rank on its own, at its own pace.
    DdpOptions own_pace;
    own_pace.log_mode = pg.rank() == 1 ? LogMode::kRankZero : LogMode::kEveryRank;
    own_pace.log_every_n = pg.rank() + 1;
    EXPECT_EQ(construction_error(pg, own_pace), "");
    // After the refusals the ranks are still in step.
    EXPECT_EQ(construction_error(pg, {}), "");
  });
}

TEST(DdpOptionsAgreement, GradientAsBucketViewMayDiffer) {
  auto world = in_process_world(3);
  on_every_rank(world, [](ProcessGroup& pg) {
    Model m;
    DdpOptions options;
    options.gradient_as_bucket_view = pg.rank() == 1;  // where this rank's gradients live, nothing more
    options.bucket_cap_mb = 0;
    DistributedDataParallel ddp(pg, m.params, options);
    for (int step = 0; step < 2; ++step) {
      for (size_t p = 3; p-- > 0;) {
        m.grads[p].fill(pg.rank() + 1 + step);  // 1, 2, 3 (+ step): average 2 (+ step)
        ddp.mark_grad_ready(p);
      }
      ddp.finish_backward();
      for (const Tensor& g : m.grads) EXPECT_EQ(g.to_doubles(), std::vector<double>(4, 2 + step)) << step;
    }
  });
}

}  // namespace
}  // namespace ddp
}  // namespace distcomm
