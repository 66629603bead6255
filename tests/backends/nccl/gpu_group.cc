#include "tests/backends/nccl/gpu_group.h"

#include "api/errors.h"
#include "tests/backends/nccl/cuda_test_env.h"

namespace distcomm {
namespace testing {

void run_gpu_group(int size, const std::string& backend, const std::function<void(ProcessGroup& pg)>& fn,
                   GroupHarnessOptions options) {
  auto eager = options.backend_config.find("eager_init");
  if (gpu_sharing_enabled() && eager != options.backend_config.end() && eager->second != "0") {
    throw InvalidArgument("run_gpu_group: eager_init would call NCCL before the shared-GPU environment is set");
  }
  run_group(
      size, backend,
      [&fn](ProcessGroup& pg) {
        prepare_rank_for_nccl(pg.global_rank(pg.rank()), pg.size());
        fn(pg);
      },
      std::move(options));
}

}  // namespace testing
}  // namespace distcomm
