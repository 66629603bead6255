// The base of GPU suites parameterised by world size (one GPU per rank): a case skips with
// the reason where this machine has fewer GPUs than ranks.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "tests/backends/nccl/cuda_test_env.h"
#include "tests/testing/require.h"

namespace distcomm {
namespace testing {

class GpuWorldSizeTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    const std::string why = missing_gpus(GetParam());
    if (!why.empty()) DISTCOMM_SKIP_WITHOUT(gpu_requirement()) << why;
  }
};

// Case names: ".../ranks2".
inline std::string world_size_name(const ::testing::TestParamInfo<int>& info) {
  return "ranks" + std::to_string(info.param);
}

}  // namespace testing
}  // namespace distcomm
