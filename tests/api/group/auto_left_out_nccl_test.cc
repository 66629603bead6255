// "auto" alone on a node where nccl cannot run (no GPU): a CUDA op says why the group has
// no backend for it, and a setting of nccl's does not fail the group's creation.
#include <gtest/gtest.h>

#include "api/errors.h"
#include "api/group/auto_backend.h"
#include "api/process_group.h"
#include "api/store/hash_store.h"
#include "tests/testing/multiprocess.h"
#include "tests/testing/refusal.h"

namespace distcomm {
namespace {

using testing::refusal;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// What this machine (no /dev/nvidia<N>) tests; on a GPU node auto may add nccl.
#define SKIP_WITH_A_GPU()                                                              \
  if (cuda_device_node_present()) GTEST_SKIP() << "this machine has a CUDA device node"

TEST(AutoLeftOutNccl, ACudaOpSaysWhyTheGroupHasNoBackendForIt) {
  SKIP_WITH_A_GPU();
  testing::run_group(2, "auto", [](ProcessGroup& pg) {
    float word = 0;
    Tensor cuda = Tensor::from_blob(&word, {1}, DType::kFloat32, Device::cuda(0));
    const std::string m = refusal([&] { pg.all_reduce(cuda); });
    EXPECT_TRUE(contains(m, "has no backend for cuda tensors: backend 'auto' sends cuda tensors to nccl only where "
                            "every rank can run it, and ranks [0, 1] cannot"))
        << m;
    EXPECT_TRUE(contains(m, "(here, rank " + std::to_string(pg.rank()) +
                                ": this process sees no CUDA device (no /dev/nvidia<N> device node))"))
        << m;
    EXPECT_TRUE(contains(m, "'cpu:auto,cuda:nccl'")) << m;
    // A batch says the same, after its op's prefix.
    std::vector<P2POp> batch{P2POp::send(cuda, 1 - pg.rank())};
    const std::string b = refusal([&] { pg.batch_isend_irecv(batch); });
    EXPECT_TRUE(contains(b, "batch_isend_irecv: group 'world'")) << b;
    EXPECT_TRUE(contains(b, "this process sees no CUDA device")) << b;
  });
}

// Named explicitly, "cpu:auto" never adds nccl: no reason to give, the message stays as it was.
TEST(AutoLeftOutNccl, CpuAutoSaysNoReason) {
  testing::run_group(2, "cpu:auto", [](ProcessGroup& pg) {
    float word = 0;
    Tensor cuda = Tensor::from_blob(&word, {1}, DType::kFloat32, Device::cuda(0));
    const std::string m = refusal([&] { pg.all_reduce(cuda); });
    EXPECT_TRUE(contains(m, "has no backend for cuda tensors")) << m;
    EXPECT_FALSE(contains(m, "nccl")) << m;
  });
}

// One program, configured for its GPU nodes (eager_init is nccl's), runs on a CPU node.
TEST(AutoLeftOutNccl, ASettingOfNcclIsTakenOnANodeWithoutAGpu) {
  SKIP_WITH_A_GPU();
  testing::GroupHarnessOptions options;
  options.backend_config = {{"eager_init", "1"}};
  testing::run_group(
      2, "auto",
      [](ProcessGroup& pg) {
        Tensor t = Tensor::of<float>({1.0f});
        pg.all_reduce(t)->wait();
        EXPECT_EQ(t.item(0), 2.0);
      },
      options);
}

// A key that is nobody's is still refused, naming it.
TEST(AutoLeftOutNccl, AKeyOfNoBackendIsStillRefused) {
  ProcessGroupOptions o;
  o.store = std::make_shared<HashStore>();
  o.backend = "auto";
  o.backend_config = {{"no_such_setting", "1"}};
  const std::string m = refusal([&] { ProcessGroup::create(o); });
  EXPECT_TRUE(contains(m, "backend config key 'no_such_setting' (= '1') is not a setting of")) << m;
}

}  // namespace
}  // namespace distcomm
