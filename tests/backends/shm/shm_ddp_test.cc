// DDP over the shm backend: training on N ranks equals one process on the combined batch,
// with the default hook (AVG, which shm reduces natively), the fp16 and bf16 compression
// hooks, and bucket caps from one bucket per gradient to a single bucket.
#include <gtest/gtest.h>

#include "ddp/comm_hooks.h"
#include "tests/ddp/training.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace ddp {
namespace test {
namespace {

class ShmDdp : public ::testing::TestWithParam<int> {};

TEST_P(ShmDdp, EqualsOneProcessAcrossBucketCapsAndHooks) {
  distcomm::testing::run_group(GetParam(), "shm", [](ProcessGroup& pg) {
    const Problem problem;
    const Trace reference = train_single_process(pg.size(), problem);
    for (double cap : {0.0, 1000.0}) {
      DdpOptions options;
      options.bucket_cap_mb = cap;
      expect_same_trace(train_with_ddp(pg, problem, options), reference, 1e-5,
                        "default hook, bucket_cap_mb=" + std::to_string(cap));
    }
    struct Case {
      const char* name;
      CommHook hook;
      double tolerance;  // float16 keeps 11 significant bits, bfloat16 8
    };
    for (const Case& c : {Case{"fp16", fp16_compress_hook(), 2e-3}, Case{"bf16", bf16_compress_hook(), 1e-2}}) {
      DdpOptions options;
      options.bucket_cap_mb = 0.001;
      options.comm_hook = c.hook;
      expect_same_trace(train_with_ddp(pg, problem, options), reference, c.tolerance, c.name);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, ShmDdp, ::testing::Values(2, 3),
                         [](const ::testing::TestParamInfo<int>& info) { return "world" + std::to_string(info.param); });

}  // namespace
}  // namespace test
}  // namespace ddp
}  // namespace distcomm
