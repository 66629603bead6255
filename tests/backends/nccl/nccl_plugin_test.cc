// The real libdistcomm_nccl.so, loaded through the plugin registry: what it declares, and
// how it says that it cannot run on a machine without a GPU.
#include <gtest/gtest.h>

#include <memory>

#include "api/errors.h"
#include "api/store/hash_store.h"
#include "api/plugin/plugin_registry.h"
#include "tests/backends/nccl/cuda_test_env.h"

namespace distcomm {
namespace {

BackendOptions cuda_options() {
  BackendOptions o;
  o.store = std::make_shared<HashStore>();
  o.device = DeviceType::kCUDA;
  o.timeout = std::chrono::milliseconds(10000);
  return o;
}

TEST(NcclPluginTest, LoadsThroughTheRegistryAndServesCudaTensors) {
  const PluginInfo& info = load_plugin("nccl");
  EXPECT_EQ(info.name, "nccl");
  EXPECT_EQ(info.devices, DISTCOMM_DEVICE_CUDA) << "nccl serves CUDA tensors only";
  EXPECT_EQ(info.flags, 0u) << "nccl rendezvous through the group's store";
  EXPECT_NE(info.path.find("libdistcomm_nccl.so"), std::string::npos) << info.path;
  EXPECT_EQ(info.version.rfind("nccl ", 0), 0u) << info.version;
}

TEST(NcclPluginTest, ProbeSaysNoCudaDeviceInCudasOwnWords) {
  const std::string expected = testing::expected_nccl_unavailable_reason();
  const PluginInfo& info = load_plugin("nccl");
  if (expected.empty()) {
    EXPECT_TRUE(info.available) << info.unavailable_reason;
    GTEST_SKIP() << "a CUDA device is present: the probe's failure path cannot be checked here";
  }
  EXPECT_FALSE(info.available);
  EXPECT_EQ(info.unavailable_reason, expected);
}

TEST(NcclPluginTest, CreatingABackendWithoutADeviceIsBackendUnavailableNotACrash) {
  const std::string expected = testing::expected_nccl_unavailable_reason();
  if (expected.empty()) GTEST_SKIP() << "a CUDA device is present";
  try {
    create_backend("nccl", cuda_options());
    FAIL() << "create_backend(\"nccl\") succeeded without a CUDA device";
  } catch (const BackendUnavailable& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("'nccl'"), std::string::npos) << m;
    EXPECT_NE(m.find(expected), std::string::npos) << m;
  }
  // The factory refuses by itself too, for a loader that did not ask the probe first.
  const PluginInfo& info = load_plugin("nccl");
  try {
    std::unique_ptr<Backend> b(info.descriptor->create(cuda_options()));
    FAIL() << "the nccl factory made a backend without a CUDA device";
  } catch (const BackendUnavailable& e) {
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace distcomm
