// Device and device-type names: what backend specs ("cpu:gloo,cuda:nccl") and tools parse.
#include <gtest/gtest.h>

#include "api/device.h"
#include "api/errors.h"

namespace distcomm {
namespace {

TEST(DeviceType, ParsesAndNamesEachType) {
  EXPECT_EQ(parse_device_type("cpu"), DeviceType::kCPU);
  EXPECT_EQ(parse_device_type("cuda"), DeviceType::kCUDA);
  EXPECT_STREQ(device_type_name(DeviceType::kCPU), "cpu");
  EXPECT_STREQ(device_type_name(DeviceType::kCUDA), "cuda");
  for (DeviceType t : {DeviceType::kCPU, DeviceType::kCUDA}) EXPECT_EQ(parse_device_type(device_type_name(t)), t);
}

TEST(DeviceType, AnUnknownNameSaysWhatIsExpected) {
  for (const char* bad : {"", "CPU", "cuda:0", "tpu"}) {
    try {
      parse_device_type(bad);
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(std::string(e.what()), std::string("unknown device type '") + bad + "': expected 'cpu' or 'cuda'");
    }
  }
}

TEST(Device, ParsesIndexesAndRoundTrips) {
  const Device cuda1 = Device::parse("cuda:1");
  EXPECT_TRUE(cuda1.is_cuda());
  EXPECT_FALSE(cuda1.is_cpu());
  EXPECT_EQ(cuda1.index, 1);
  EXPECT_EQ(cuda1.str(), "cuda:1");
  EXPECT_EQ(Device::parse("cuda"), Device::cuda(0));
  const Device cpu = Device::parse("cpu");
  EXPECT_TRUE(cpu.is_cpu());
  EXPECT_FALSE(cpu.is_cuda());
  EXPECT_EQ(cpu, Device::cpu());
  EXPECT_EQ(cpu.str(), "cpu");
  EXPECT_NE(Device::cuda(0), Device::cuda(1));
  EXPECT_THROW(Device::parse("cpu:1"), InvalidArgument);
  EXPECT_THROW(Device::parse("cuda:"), InvalidArgument);
  EXPECT_THROW(Device::parse("cuda:x"), InvalidArgument);
}

}  // namespace
}  // namespace distcomm
