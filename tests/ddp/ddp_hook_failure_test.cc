// A comm hook that fails (throws, or returns no Work) ends its backward pass cleanly: the
// error names the bucket, what was launched is waited for, and the next pass starts afresh.
// Inside join, such a failure on the rank whose hook failed -- or any failure that is not
// one every rank raises alike -- ends that rank's join, and the rank that has joined learns
// of it within the group's timeout instead of retrying the pass forever. Found by a review:
// the next pass said "marked ready twice", finish_backward() after it crashed on a bucket
// without a Work, and a joined rank spun at full CPU after its peer's hook threw.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "api/errors.h"
#include "ddp/distributed_data_parallel.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace ddp {
namespace {

using Clock = std::chrono::steady_clock;

// allreduce_hook, except that its call number `fail_at` (counted from 0, on ranks for which
// fails_here is set) throws, or returns no Work when `no_work` is set.
CommHook failing_hook(int* calls, int fail_at, bool fails_here, bool no_work) {
  return [plain = allreduce_hook(), calls, fail_at, fails_here, no_work](ProcessGroup& pg, GradBucket& b) -> WorkPtr {
    if ((*calls)++ != fail_at || !fails_here) return plain(pg, b);
    if (no_work) return nullptr;
    throw Error("the hook failed on purpose");
  };
}

// One pass of two one-element gradients, rank r giving (r + 1) * scale: averaged over 2
// ranks, 1.5 * scale.
void pass(DistributedDataParallel& ddp, Tensor& g0, Tensor& g1, int rank, float scale) {
  g0.fill((rank + 1) * scale);
  g1.fill((rank + 1) * scale);
  ddp.mark_grad_ready(0);
  ddp.mark_grad_ready(1);
  ddp.finish_backward();
}

void failing_pass_then_clean_ones(bool no_work) {
  for (const char* backend : {"gloo", "shm"}) {
    SCOPED_TRACE(backend);
    testing::run_group(2, backend, [no_work](ProcessGroup& pg) {
      Tensor w0 = Tensor::zeros({1}), g0 = Tensor::zeros({1}), w1 = Tensor::zeros({1}), g1 = Tensor::zeros({1});
      int calls = 0;
      DdpOptions o;
      o.bucket_cap_mb = 0;  // a bucket per gradient: the second bucket's hook fails after the first launched
      o.comm_hook = failing_hook(&calls, /*fail_at=*/1, /*fails_here=*/true, no_work);
      DistributedDataParallel ddp(pg, {{"p0", &w0, &g0}, {"p1", &w1, &g1}}, o);
      try {
        pass(ddp, g0, g1, pg.rank(), 1);
        ADD_FAILURE() << "the pass whose hook failed ended well";
      } catch (const Error& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("DDP: the comm hook of bucket "), std::string::npos) << m;
        EXPECT_NE(m.find(no_work ? "returned no Work" : "the hook failed on purpose"), std::string::npos) << m;
        // Said once: the bucket was named twice, "the comm hook of bucket 1 of 2 (...): DDP:
        // the comm hook returned no Work for bucket 1 of 2 (...)".
        EXPECT_EQ(m.find("bucket 1 of 2"), m.rfind("bucket 1 of 2")) << m;
        EXPECT_EQ(m.find("DDP:"), m.rfind("DDP:")) << m;
      }
      // finish_backward() now (as the message of a missed gradient advises after a failed
      // pass) is a pass of its own, in which no rank marked anything: that error on every
      // rank, not a crash on the failed pass's leftovers.
      try {
        ddp.finish_backward();
        ADD_FAILURE() << "a pass without gradients ended well";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("got no gradient in this backward pass"), std::string::npos) << e.what();
      }
      // Then passes as before, averaged.
      pass(ddp, g0, g1, pg.rank(), 2);
      EXPECT_EQ(g0.item(0), 3.0);
      EXPECT_EQ(g1.item(0), 3.0);
    });
  }
}

TEST(DdpHookFailure, AHookThatThrowsEndsThePassAndTheNextStartsAfresh) { failing_pass_then_clean_ones(false); }

TEST(DdpHookFailure, AHookThatReturnsNoWorkEndsThePassAndTheNextStartsAfresh) { failing_pass_then_clean_ones(true); }

// Rank 1 still trains; its hook throws in its second pass, and its loop catches every error
// and goes on. Rank 0 has joined: the pass it runs for rank 1 never gets rank 1's second
// bucket, and rank 1's next collective is not that bucket's. Both joins end with an error
// within the group's timeout (3 s): a Desync naming both ops, or a Timeout naming the op.
TEST(DdpHookFailure, InsideJoinAHookFailureEndsBothRanksJoinsWithinTheTimeout) {
  for (const char* backend : {"gloo", "shm"}) {
    SCOPED_TRACE(backend);
    testing::GroupHarnessOptions options;
    options.op_timeout = std::chrono::milliseconds(3000);
    testing::run_group(
        2, backend,
        [](ProcessGroup& pg) {
          const int me = pg.rank();
          Tensor w0 = Tensor::zeros({1}), g0 = Tensor::zeros({1}), w1 = Tensor::zeros({1}), g1 = Tensor::zeros({1});
          int calls = 0;
          DdpOptions o;
          o.bucket_cap_mb = 0;
          o.comm_hook = failing_hook(&calls, /*fail_at=*/3, /*fails_here=*/me == 1, /*no_work=*/false);
          DistributedDataParallel ddp(pg, {{"p0", &w0, &g0}, {"p1", &w1, &g1}}, o);
          const auto start = Clock::now();
          std::string first_caught;  // by rank 1's loop, which goes on after every error
          try {
            ddp.join([&] {
              for (int k = 0; k < (me == 0 ? 1 : 4); ++k) {
                try {
                  pass(ddp, g0, g1, me, 1);
                } catch (const Error& e) {
                  if (first_caught.empty()) first_caught = e.what();
                }
              }
            });
            ADD_FAILURE() << "rank " << me << ": join ended well";
          } catch (const Error& e) {
            EXPECT_TRUE(dynamic_cast<const Desync*>(&e) || dynamic_cast<const Timeout*>(&e) ||
                        dynamic_cast<const PeerFailure*>(&e))
                << "rank " << me << ": " << e.what();
          }
          EXPECT_LT(Clock::now() - start, std::chrono::seconds(15)) << "rank " << me;
          if (me == 1) EXPECT_NE(first_caught.find("the hook failed on purpose"), std::string::npos) << first_caught;
        },
        options);
  }
}

}  // namespace
}  // namespace ddp
}  // namespace distcomm
