// run_group for the GPU suites: each rank first sets NCCL's environment for the shared-GPU
// opt-in (cuda_test_env.h), then runs the test body on its group.
#pragma once

#include <functional>
#include <string>

#include "api/process_group.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace testing {

// As run_group. The environment is set in each rank before its first op, which is when
// the nccl backend first calls NCCL; so "eager_init" is refused while sharing is on.
void run_gpu_group(int size, const std::string& backend, const std::function<void(ProcessGroup& pg)>& fn,
                   GroupHarnessOptions options = {});

}  // namespace testing
}  // namespace distcomm
