// The rule behind backend "auto" (api/group/auto_backend.h), and the spec parsing that routes it.
#include "api/group/auto_backend.h"

#include <gtest/gtest.h>

#include "api/process_group.h"

namespace distcomm {
namespace {

TEST(AutoBackend, ShmOnlyWhenEveryRankSharesTheDomainAndCanRunShm) {
  const std::string here = "boot-a pid:[1] shm";
  EXPECT_EQ(choose_auto_cpu_backend({here}), "shm");
  EXPECT_EQ(choose_auto_cpu_backend({here, here, here}), "shm");
  EXPECT_EQ(choose_auto_cpu_backend({here, "boot-b pid:[1] shm"}), "gloo") << "another host";
  EXPECT_EQ(choose_auto_cpu_backend({here, "boot-a pid:[2] shm"}), "gloo") << "another PID namespace";
  EXPECT_EQ(choose_auto_cpu_backend({here, "boot-a pid:[1]"}), "gloo") << "a rank without the shm plugin";
  EXPECT_EQ(choose_auto_cpu_backend({"boot-a pid:[1]", "boot-a pid:[1]"}), "gloo") << "no rank has it";
}

TEST(AutoBackend, ThisProcessHasADomain) {
  const std::string domain = shared_memory_domain();
  EXPECT_NE(domain.find("pid:["), std::string::npos) << domain;
  EXPECT_EQ(auto_backend_placement(PluginSearch::from_environment()).rfind(domain, 0), 0u) << "the placement starts with the domain";
}

TEST(AutoBackend, SpecRoutesCpuToAuto) {
  EXPECT_EQ(BackendSpec::parse("auto").by_device.at(DeviceType::kCPU), "auto");
  EXPECT_EQ(BackendSpec::parse("auto").by_device.count(DeviceType::kCUDA), 0u);
  const BackendSpec mixed = BackendSpec::parse("cpu:auto,cuda:nccl");
  EXPECT_EQ(mixed.by_device.at(DeviceType::kCPU), "auto");
  EXPECT_EQ(mixed.by_device.at(DeviceType::kCUDA), "nccl");
}

}  // namespace
}  // namespace distcomm
